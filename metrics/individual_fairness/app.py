import evaluate

from vlfair.metrics import install_metrics
from vlfair.widget import metric_widget

# A worked example fills the widget; evaluate's own launch_gradio_widget needs Gradio 3 (see vlfair.widget).
EXAMPLE = {
    "image_embeddings": [[1.0, 0.0], [0.0, 1.0]],
    "text_embeddings_a": [[2.0, 0.1], [0.1, 2.0]],
    "text_embeddings_b": [[1.5, 0.3], [0.2, 1.8]],
}
OPTIONS = {}

# Offline, evaluate.load falls back to its modules cache: put the module vlfair ships there first.
# Online (as a Space), the same string loads this Space's own module.
install_metrics(["individual_fairness"])
demo = metric_widget(evaluate.load("vlfair/individual_fairness"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
