"""The tests' network guard: outside addresses fail at once, loopback stays open."""

import socket
import subprocess
import sys
import threading

import pytest

import no_network

# TEST-NET-1 (RFC 5737): documentation addresses, routed nowhere.
OUTSIDE = ("192.0.2.1", 80)


def test_a_connection_outside_loopback_fails_at_once_naming_the_host(expect_network_block):
    with pytest.raises(no_network.NetworkBlockedError, match=r"192\.0\.2\.1:80"):
        socket.create_connection(OUTSIDE, timeout=5)
    assert expect_network_block[-1] == "192.0.2.1:80"


def test_connect_ex_and_ipv6_are_guarded_too(expect_network_block):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(no_network.NetworkBlockedError, match="192.0.2.1"):
            sock.connect_ex(OUTSIDE)
    if socket.has_ipv6:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            with pytest.raises(no_network.NetworkBlockedError, match="2001:db8::1"):
                sock.connect(("2001:db8::1", 443))


def test_a_name_lookup_of_an_outside_host_fails_naming_it(expect_network_block):
    with pytest.raises(no_network.NetworkBlockedError, match="example.com:443"):
        socket.getaddrinfo("example.com", 443)
    # urllib turns it into a URLError, as a real outage would, and names the host.
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.URLError, match="example.org"):
        urllib.request.urlopen("http://example.org/", timeout=5)


def test_loopback_stays_open():
    peers = []

    def accept(server):
        connection, address = server.accept()  # raises socket.timeout after 5 s
        peers.append(address)
        connection.close()

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(5)
        port = server.getsockname()[1]
        accepted = threading.Thread(target=accept, args=(server,), daemon=True)
        accepted.start()
        with socket.create_connection(("localhost", port), timeout=5) as client:
            client_address = client.getsockname()
        accepted.join(timeout=5)
        assert not accepted.is_alive()
    assert peers == [client_address]  # the server accepted this very connection


def test_a_swallowed_block_is_still_recorded(expect_network_block):
    try:
        socket.create_connection(OUTSIDE, timeout=5)
    except OSError:
        pass  # the code under test hides it; the autouse check would fail the test
    assert expect_network_block[-1:] == ["192.0.2.1:80"]


def test_processes_started_by_the_tests_are_guarded():
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=5)\n"
        "except OSError as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("NetworkBlockedError")
    assert "192.0.2.1:80" in result.stdout
