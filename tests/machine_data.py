"""How to get the machine's own data that a few tests read, for their skip reasons.

Most tests make their data. A few also read what the machine has: the gettext catalogs of
installed software (`/usr/share/locale/LANG/LC_MESSAGES/*.mo`) and Debian's Fashion-MNIST.
Each such test says in its own skip reason what it needs; the remedy, the same for all, is here.
"""

CATALOGS_REMEDY = (
    "packages bring them with their translations, unless a minimal image drops them (a "
    "path-exclude of /usr/share/locale in /etc/dpkg/dpkg.cfg.d/; remove it, then apt-get "
    "install --reinstall coreutils)")

FASHION_MNIST_REMEDY = (
    "`make data` installs it when run as root with apt (or apt-get install "
    "dataset-fashion-mnist)")
