"""Interpreter start-up: an empty script (site, encodings, the importlib)."""
