import evaluate
from evaluate.utils import launch_gradio_widget

launch_gradio_widget(evaluate.load("vlfair/trait_anova"))
