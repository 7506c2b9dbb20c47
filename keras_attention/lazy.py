"""Names a package loads on first use (PEP 562), so that importing the package loads no Keras:
what the packages' `__getattr__` share."""

import importlib


def submodule(package, name):
    """The module `package.name`, imported (then an attribute of the package, as if the package
    had imported it); `AttributeError` where the package has no such module."""
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{package}.{name}":
                raise  # the module exists; something it imports does not
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def module_getattr(package, names):
    """A package's `__getattr__`: each of `names` ({name: module}) from its module, imported on
    first use; any other name a submodule (`submodule`)."""

    def __getattr__(name):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        return submodule(package, name)

    return __getattr__


def by_module(modules):
    """`{name: module}` (what `module_getattr` takes) from `{module: (name, ...)}`."""
    return {name: module for module, names in modules.items() for name in names}
