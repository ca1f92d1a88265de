import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "predictions": [0.71, 0.74, 0.69, 0.62, 0.6, 0.65, 0.7, 0.72],
    "references": ["East Asian", "East Asian", "East Asian", "Black", "Black", "Black", "White", "White"],
}
OPTIONS = {
    "bootstrap": 200,
}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["trait_anova"])
demo = metric_widget(evaluate.load("vlfair/trait_anova"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
