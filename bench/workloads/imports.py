"""Importing 20 stdlib modules (pure-Python module bodies, class bodies,
decorators).  Argument: how many times (default 4): after the first, the
modules are dropped from sys.modules and imported afresh, so that their
bodies run again (from the .pyc files the first round used)."""
import importlib
import sys
import threading    # as bench/count_calls.py does: the same modules stay


MODULES = ["argparse", "ast", "calendar", "configparser", "csv",
           "dataclasses", "decimal", "difflib", "email.message", "fractions",
           "json", "logging", "pathlib", "pprint", "shlex", "statistics",
           "string", "textwrap", "typing", "uuid"]

before = set(sys.modules)
for round_ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
    if round_:
        for name in set(sys.modules) - before:
            del sys.modules[name]
    for name in MODULES:
        importlib.import_module(name)
