"""The planted-bias world behind ``vlfair demo`` and the validity tests."""
