import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget: two models' scores of the same six portraits, one row each;
# evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions1": [70.1, 68.4, 72.0, 81.9, 80.2, 83.5],
    "predictions2": [78.3, 77.0, 79.4, 80.6, 79.1, 81.8],
    "references": ["Female", "Female", "Female", "Male", "Male", "Male"],
}
OPTIONS = {
    "protected_group": "Female",
    "reference_group": "Male",
    "bootstrap": 200,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["bias_difference"])
demo = metric_widget(evaluate.load("vlfair/bias_difference"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
