"""
The network surface: a fresh network namespace with loopback only. Host
listeners must receive nothing; loopback inside must work for test servers.
"""

import errno
import textwrap

import pytest

from conftest import assert_errno, host_ipv4_addresses

# Inside the sandbox's namespace 127.0.0.1 has nothing listening; any other
# address has no route, and a TCP connect to one is refused by the keeper of
# every connect() (init), which tells the gateway (sandbox/door.h).
LOOPBACK_REFUSED = (errno.ECONNREFUSED,)
NO_ROUTE = (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL)
TCP_REFUSED = NO_ROUTE + (errno.ECONNREFUSED,)


def test_host_loopback_listener_gets_nothing(cordon, tcp_listener):
    l = tcp_listener("127.0.0.1")
    r = cordon.probe("connect-tcp", "127.0.0.1", l.port)
    assert_errno(r, *LOOPBACK_REFUSED)
    assert l.count() == 0


def test_host_address_listener_gets_nothing(cordon, tcp_listener):
    addrs = host_ipv4_addresses()
    if not addrs:
        pytest.skip("this host has no non-loopback IPv4 address (ip -4 addr)")
    for a in addrs:
        l = tcp_listener(a)
        r = cordon.probe("connect-tcp", a, l.port)
        assert_errno(r, *TCP_REFUSED)
        assert l.count() == 0, a


def test_public_address_unreachable(cordon):
    # 198.51.100.0/24 is TEST-NET-2: no packet leaves; the namespace has no route.
    r = cordon.probe("connect-tcp", "198.51.100.7", 80)
    assert_errno(r, *TCP_REFUSED)
    assert "egress refused: 198.51.100.7 (no rule" in r.err, r
    r = cordon.probe("send-udp", "198.51.100.7", 53)
    assert_errno(r, *TCP_REFUSED)


def test_host_unix_socket_gets_nothing(cordon, unix_listener):
    r = cordon.probe("connect-unix", unix_listener.path)
    assert_errno(r, errno.ENOENT)
    assert unix_listener.count() == 0


def test_host_abstract_socket_gets_nothing(cordon, abstract_listener):
    # Abstract names live in the network namespace: the host's is not there.
    # (Landlock's abstract-socket scope would say EPERM if it were.)
    r = cordon.probe("connect-abstract", abstract_listener.name)
    assert_errno(r, errno.ECONNREFUSED, errno.EPERM)
    assert abstract_listener.count() == 0


def test_loopback_inside_works(cordon):
    r = cordon.probe("bind-tcp", "127.0.0.1", 0)
    assert r.status == 0, r
    assert "loopback ok" in r.out
    r = cordon.probe("bind-tcp", "127.0.0.1", 8080)
    assert r.status == 0, r


def test_local_http_server_inside(cordon):
    """A test suite that starts a local server still works in the sandbox."""
    script = textwrap.dedent(
        """
        import subprocess, sys, time, urllib.request, pathlib
        pathlib.Path("hello.txt").write_text("served from inside\\n")
        srv = subprocess.Popen([sys.executable, "-m", "http.server", "8765",
                                "--bind", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    body = urllib.request.urlopen("http://127.0.0.1:8765/hello.txt",
                                                  timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                sys.exit("server never answered")
            sys.stdout.write(body.decode())
        finally:
            srv.kill()
            srv.wait()
        """
    )
    r = cordon.run(["python3", "-c", script], "-t", "60s")
    assert r.status == 0, r
    assert r.out == "served from inside\n", r


def test_only_loopback_interface(cordon):
    r = cordon.run(["cat", "/proc/net/dev"])
    assert r.status == 0, r
    ifaces = {l.split(":")[0].strip() for l in r.out.splitlines()[2:]}
    assert ifaces == {"lo"}, r
    r = cordon.run(["cat", "/proc/net/route"])
    assert r.status == 0, r
    assert len(r.out.strip().splitlines()) <= 1, f"routes inside:\n{r}"


@pytest.mark.parametrize("action", ["socket-netlink", "socket-packet"])
def test_raw_sockets_refused(cordon, action):
    r = cordon.probe(action)
    assert_errno(r, errno.EPERM, errno.EAFNOSUPPORT)

