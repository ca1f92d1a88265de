import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions": [1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0],
    "variants": ["", "", "", "", "0", "0", "0", "0", "1", "1", "1", "1", "0,1", "0,1", "0,1", "0,1"],
}
OPTIONS = {
    "num_words": 2,
    "k": 1,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["word_influence"])
demo = metric_widget(evaluate.load("vlfair/word_influence"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
