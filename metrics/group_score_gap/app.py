import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions": [30.0, 32.0, 25.0, 27.0, 20.0, 22.0],
    "references": ["White", "White", "Black", "Black", "Indian", "Indian"],
}
OPTIONS = {
    "bootstrap": 200,
    "n_permutations": 1000,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["group_score_gap"])
demo = metric_widget(evaluate.load("vlfair/group_score_gap"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
