"""An optional package made to look uninstalled to the zoo's exports, which import the
formats' converters and runtimes through `importlib.import_module` when they need them."""

from zoo.export import formats


def hide(monkeypatch, prefix):
    """Until the test ends, importing a module whose name starts with `prefix` through
    `importlib.import_module` raises `ImportError`, as where it is not installed."""
    real = formats.importlib.import_module

    def without(name, *args):
        if name.startswith(prefix):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args)

    monkeypatch.setattr(formats.importlib, "import_module", without)
