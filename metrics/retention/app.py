import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions": [[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.8, 0.1]],
    "references": [0, 1, 2],
}
OPTIONS = {
    "bootstrap": 200,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["retention"])
demo = metric_widget(evaluate.load("vlfair/retention"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
