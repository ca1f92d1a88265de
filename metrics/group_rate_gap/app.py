import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions": ["Male", "Male", "Female", "Male", "Female", "Female"],
    "references": ["Male", "Male", "Female", "Female", "Female", "Female"],
    "groups": ["White", "White", "White", "Black", "Black", "Black"],
}
OPTIONS = {
    "bootstrap": 200,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["group_rate_gap"])
demo = metric_widget(evaluate.load("vlfair/group_rate_gap"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
