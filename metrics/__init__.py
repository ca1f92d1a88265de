"""vlfair's evaluate modules, one folder each; installed as ``vlfair._metrics`` inside the wheel.

Each folder is a self-contained evaluate module (``<name>.py``), its card (``README.md``,
which is also the Space config), ``app.py`` and ``requirements.txt``. ``vlfair.load_metric``
loads them from the installed package, offline.
"""
