"""What the demo Space needs beyond the probes: encoder and data choices, upload checks, limits.

The Gradio app in ``spaces/demo/app.py`` is only layout; everything it calls lives here, so the
same checks run in tests, in the Space and for anyone embedding vlfair in another web app.
"""
