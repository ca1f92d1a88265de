import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions": ["cat", "dog", "cat", "cat", "dog", "dog"],
    "references": ["cat", "dog", "cat", "cat", "cat", "cat"],
    "languages": ["en", "en", "en", "de", "de", "de"],
}
OPTIONS = {
    "pivot": "en",
    "bootstrap": 200,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["cross_lingual_gap"])
demo = metric_widget(evaluate.load("vlfair/cross_lingual_gap"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
