"""Run by every Python process the tests launch: no network outside loopback.

`tests/conftest.py` puts this folder on `PYTHONPATH`; the guard itself is
`tests/no_network.py`, loaded by path so nothing else of `tests/` is importable.
"""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "no_network", pathlib.Path(__file__).resolve().parents[1] / "no_network.py"
)
_no_network = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_no_network)
_no_network.install()
