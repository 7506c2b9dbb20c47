"""No network in the tests: connections outside the loopback range fail at once.

`install()` wraps `socket.socket.connect`, `connect_ex` and `socket.getaddrinfo`:
a connection to an address outside 127.0.0.0/8 and ::1, or a name lookup of
any host but this machine's own names, raises `NetworkBlockedError` (an
`OSError`, so libraries report it as "no network") naming the host. Unix
sockets and loopback stay open, for the multi-worker tests.

`tests/conftest.py` installs it in the pytest process and records each block,
so a test whose code swallows the error still fails. Processes the tests start
get it too: `tests/sitecustomize/` is put on their `PYTHONPATH`.
"""

import ipaddress
import socket

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}

blocked = []  # "host:port" of each refused attempt, in order


class NetworkBlockedError(OSError):
    """A connection (or a name lookup) outside loopback, refused by the tests."""


def _is_loopback(host):
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).split("%", 1)[0]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() in LOCAL_NAMES or host.lower() == socket.gethostname().lower()


def _refuse(what, host, port):
    target = f"{host}:{port}" if port is not None else str(host)
    blocked.append(target)
    raise NetworkBlockedError(
        f"network access blocked in the tests: {what} {target} (only loopback is allowed)"
    )


def _check_address(sock, address):
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # Unix and other local sockets
    host, port = address[0], address[1]
    if not _is_loopback(host):
        _refuse("connection to", host, port)


def install():
    """Guard this process; idempotent."""
    if getattr(socket.socket.connect, "_no_network", False):
        return
    connect, connect_ex, getaddrinfo = (
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)

    def guarded_connect(self, address):
        _check_address(self, address)
        return connect(self, address)

    def guarded_connect_ex(self, address):
        _check_address(self, address)
        return connect_ex(self, address)

    def guarded_getaddrinfo(host, port, *args, **kwargs):
        if host is not None and not _is_loopback(host):
            _refuse("name lookup of", host, port)
        return getaddrinfo(host, port, *args, **kwargs)

    for function in (guarded_connect, guarded_connect_ex, guarded_getaddrinfo):
        function._no_network = True
    socket.socket.connect = guarded_connect
    socket.socket.connect_ex = guarded_connect_ex
    socket.getaddrinfo = guarded_getaddrinfo
