import evaluate
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

demo = metric_widget(evaluate.load("vlfair/cross_lingual_gap"), EXAMPLE, OPTIONS)

if __name__ == "__main__":
    demo.launch()
