"""What the demo Space needs beyond the probes: encoder and data choices, upload checks, limits.

The Gradio app in ``spaces/demo/app.py`` is only layout; everything it calls lives here, so the
same checks run in tests, in the Space and for anyone embedding vlfair in another web app.

Only a probe the demo Space must run differently from its YAML (word-influence's prompt and planted
generator, traits' own sample) adds a ``space.session.SPACE_PARTS`` entry; every other probe's choices and
uploads follow from its class.

The demo Space offers the world's two answerers beside its encoders (``space.session.ENCODERS``;
professions asks them as the demo does).

What a request leaves on disk (its uploads, its outputs), and the cap on all of it: ``space.session.RequestStore``.
"""
