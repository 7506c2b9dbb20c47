"""Why a test that reads this machine's own data skips, and how to get that data.

Most tests make their data. A few also read what the machine has: the gettext catalogs of
installed software (`/usr/share/locale/LANG/LC_MESSAGES/*.mo`) and Debian's Fashion-MNIST.
Each returns None when the data is here, else the skip reason, with the remedy.
"""

from zoo import datasets
from zoo.datasets import catalogs


def catalogs_missing(language, still_ran=""):
    """None when `language` has gettext catalogs here, else the skip reason; `still_ran`:
    what the test file checked without them, said last."""
    if language in catalogs.languages():
        return None
    return (f"needs the {language!r} gettext catalogs of installed software "
            f"({catalogs.LOCALE_DIR}/{language}/LC_MESSAGES/*.mo) and this machine has none: "
            "packages bring them with their translations, unless a minimal image drops them "
            "(a path-exclude of /usr/share/locale in /etc/dpkg/dpkg.cfg.d/; remove it, then "
            "apt-get install --reinstall coreutils)" + (f"; {still_ran}" if still_ran else ""))


def fashion_mnist_missing():
    """None when Debian's dataset-fashion-mnist is installed, else why its test skips."""
    if (datasets.FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file():
        return None
    return (f"reads Debian's Fashion-MNIST in {datasets.FASHION_MNIST_DIR}, which is not "
            "installed: `make data` installs it when run as root with apt (or apt-get install "
            "dataset-fashion-mnist)")
