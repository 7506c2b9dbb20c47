"""Run functions once Keras has been imported: how a light package registers its Keras
objects (layers, losses, activations) for `keras.saving.load_model` without importing
Keras itself.

    after_import.when_keras_loaded(register)  # now if Keras is loaded, else once it is

`import keras_attention` and `import zoo` import no Keras (so that `zoo list` runs
without TensorFlow), yet a `.keras` file naming their layers must load after
`import zoo; import keras`, as it did when they imported every layer themselves.
A finder on `sys.meta_path` wraps the loaders of `keras` and `tensorflow` (each
imports the other) and runs the functions when the outermost of the two has
finished, so that they see both whole; then it removes itself.
"""

import importlib.abc
import importlib.util
import sys
import warnings

WATCHED = ("keras", "tensorflow")
_CALLBACKS = []


def _initializing(name):
    module = sys.modules.get(name)
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _run_callbacks():
    callbacks = list(_CALLBACKS)
    _CALLBACKS.clear()
    for callback in callbacks:
        try:
            callback()
        except Exception as error:  # noqa: BLE001 - Keras itself imported; say what failed
            warnings.warn(f"registering Keras objects after `import keras` failed: "
                          f"{type(error).__name__}: {error}", stacklevel=2)


class _Loader(importlib.abc.Loader):
    """The real loader of a watched module, and the callbacks when the last one ends."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):  # get_resource_reader, is_package, ...
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        try:
            self.loader.exec_module(module)
        finally:
            module.__loader__ = module.__spec__.loader = self.loader
        others = [name for name in WATCHED if name != module.__name__]
        if "keras" in sys.modules and not any(_initializing(name) for name in others):
            _FINDER.remove()
            _run_callbacks()


class _Finder(importlib.abc.MetaPathFinder):
    """Gives the watched modules their real spec, with the loader wrapped."""

    def __init__(self):
        self.busy = False

    def find_spec(self, name, path=None, target=None):
        if name not in WATCHED or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec

    def install(self):
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


_FINDER = _Finder()


def when_keras_loaded(callback):
    """Call `callback()` now if Keras is imported, else right after it is (once)."""
    if "keras" in sys.modules and not any(_initializing(name) for name in WATCHED):
        callback()
        return
    _CALLBACKS.append(callback)
    _FINDER.install()
