"""Run by every Python process the tests launch: no network outside loopback.

`tests/conftest.py` puts this folder on `PYTHONPATH`; the guard itself is
`tests/no_network.py`, loaded by path so nothing else of `tests/` is importable.
"""

import importlib.util
import pathlib
import sys

_spec = importlib.util.spec_from_file_location(
    "no_network", pathlib.Path(__file__).resolve().parents[1] / "no_network.py"
)
_no_network = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_no_network)
# Registered under its name, so that `tests/conftest.py` in a pytest-xdist worker (a process
# the tests started, guarded here first) imports this very module: one `blocked` list, one
# `NetworkBlockedError` class.
sys.modules.setdefault("no_network", _no_network)
_no_network = sys.modules["no_network"]
_no_network.install()
