"""
Host unix sockets through any bind (issue 22, item 9). A read-only bind
does not stop connect(), and Landlock has no right for it: a directory bound
into a run that holds a live host socket (ssh-agent, docker, D-Bus) would be
a way out. Every pathname connect is made by a keeper that reaches only the
run's own sockets and those filesystem.unix_sockets lists (sandbox/usock.h);
unix datagram sockets are refused, so no send can name a host socket either.

Each refusal test puts a real host server (a stream listener and a datagram
socket, both 0777 so only cordon stands in the way) where the sandbox can
see it, asserts the errno the probe got and that the server received
nothing: present at start in a --ro bind, a --rw bind and the -w workspace,
appearing while the run waits (a marker, not a sleep), reached through a
link, through /proc, by a relative path, and abstract.
"""

import errno
import json
import os
import socket
import subprocess
import threading
import time

import pytest

from conftest import PROBE, assert_cordon_refused, assert_errno, wait_until

# What a refused connect to a host socket answers, per level: the keeper's
# EACCES where the host's kernel serves the command; gVisor's gofer refuses
# to open a host socket (EPERM at its door, ECONNREFUSED past it); a guest
# kernel finds no socket bound to a 9p file (ECONNREFUSED).
REFUSED = {
    # (a host workspace's sockets present at start are covered too: ECONNREFUSED)
    "namespace": (errno.EACCES, errno.ECONNREFUSED),
    "process": (errno.EACCES,),
    "gvisor": (errno.ECONNREFUSED, errno.EPERM, errno.EACCES),
    "microvm": (errno.ECONNREFUSED,),
}
# /proc/self/root and /proc/PID/cwd are magic links: the keeper does not follow them.
REFUSED_MAGIC = {lvl: e + (errno.ELOOP,) for lvl, e in REFUSED.items()}
# The abstract namespace: the run's own network namespace has none of the host's
# (ECONNREFUSED); the process level shares the host's and refuses every one (EPERM).
REFUSED_ABSTRACT = {"namespace": (errno.ECONNREFUSED,), "process": (errno.EPERM,),
                    "gvisor": (errno.ECONNREFUSED,), "microvm": (errno.ECONNREFUSED,)}


# Every refusal runs with the gateway: at the gvisor level it is what opens
# runsc's --host-uds, the door the gofer would otherwise hold shut itself.
GATEWAY = ("--allow", "example.test")


class HostServer:
    """A stream listener at PATH and a datagram socket at PATH.dgram, counting what reaches them."""

    def __init__(self, path):
        self.path = str(path)
        self.dgram_path = self.path + ".dgram"
        self.stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stream.bind(self.path)
        self.stream.listen(16)
        self.dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.dgram.bind(self.dgram_path)
        for p in (self.path, self.dgram_path):
            os.chmod(p, 0o777)
        self.stream.settimeout(0.1)
        self.dgram.settimeout(0.1)
        self.accepted = 0
        self.datagrams = 0
        self.conns = []
        self._stop = False
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop:
            try:
                c, _ = self.stream.accept()
                self.accepted += 1
                self.conns.append(c)  # left open: the client writes after connecting
            except (socket.timeout, OSError):
                pass
            try:
                self.dgram.recv(64)
                self.datagrams += 1
            except (socket.timeout, OSError):
                pass

    def got(self):
        time.sleep(0.3)  # a connection or datagram in flight is counted before we look
        return self.accepted + self.datagrams

    def close(self):
        self._stop = True
        self._t.join()
        self.stream.close()
        self.dgram.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def servers():
    made = []

    def make(path):
        s = HostServer(path)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def expect(cordon, table):
    return table[cordon.level]


def hostdir_for(cordon, name):
    """A host directory the run's identity owns, world-searchable (the servers are root's)."""
    d = cordon.hostdir(name)
    os.chmod(d, 0o777)
    return d


def bind_opts(cordon, how, d):
    """Options that show host directory D in the run at /mnt/d (HOW: ro, rw, workspace);
    where it is seen."""
    if how == "workspace":
        return ["-w", str(d), *GATEWAY], "/workspace" if cordon.level != "process" else str(d)
    return [f"--{how}", f"{d}:/mnt/d", *GATEWAY], "/mnt/d"


@pytest.mark.parametrize("how", ["ro", "rw", "workspace"])
def test_host_socket_present_at_start(cordon, servers, how):
    d = hostdir_for(cordon, "binds")
    srv = servers(d / "host.sock")
    opts, at = bind_opts(cordon, how, d)
    connect = cordon.probe("connect-unix", f"{at}/host.sock", opts=opts)
    sendto = cordon.probe("sendto-unix", f"{at}/host.sock.dgram", opts=opts)
    if cordon.level == "gvisor" and how == "workspace":
        # runsc mounts nothing over a socket: a workspace holding one is refused
        assert_cordon_refused(connect, "socket")
        assert_cordon_refused(sendto, "socket")
    else:
        assert_errno(connect, *expect(cordon, REFUSED))
        assert_errno(sendto, errno.EACCES)
    assert srv.got() == 0, "the host's server received a connection or a datagram"


@pytest.mark.parametrize("how", ["ro", "rw", "workspace"])
def test_host_socket_appearing_during_run(cordon, servers, how):
    """The socket is made after the run started (after any scan of its binds)."""
    d = hostdir_for(cordon, "binds")
    w = hostdir_for(cordon, "marks")
    opts, at = bind_opts(cordon, how, d)
    script = (f"touch /mnt/w/ready; while [ ! -e {at}/go ]; do sleep 0.05; done; "
              f"{PROBE} connect-unix {at}/late.sock; echo connect=$?; "
              f"{PROBE} sendto-unix {at}/late.sock.dgram; echo sendto=$?")
    p = cordon.popen(["/bin/sh", "-c", script], *opts, "--rw", f"{w}:/mnt/w", text=True)
    try:
        assert wait_until(lambda: (w / "ready").exists() or p.poll() is not None, 60), \
            "the run never started"
        srv = servers(d / "late.sock")
        (d / "go").touch()
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    codes = dict(line.split("=") for line in out.split() if "=" in line)
    assert int(codes.get("connect", -1)) in expect(cordon, REFUSED), (out, err)
    assert int(codes.get("sendto", -1)) == errno.EACCES, (out, err)
    assert srv.got() == 0, "the host's server received a connection or a datagram"


def test_host_socket_through_links(cordon, servers):
    """A link the run makes, and one planted on the host, both to a host socket."""
    d = hostdir_for(cordon, "binds")
    srv = servers(d / "host.sock")
    w = hostdir_for(cordon, "ws")
    mounts = cordon.level != "process"
    os.symlink("/mnt/d/host.sock" if mounts else d / "host.sock", w / "planted.sock")
    ws = "/workspace" if mounts else w
    script = (f'ln -s /mnt/d/host.sock "${{TMPDIR:-/tmp}}/l.sock"; '
              f'{PROBE} connect-unix "${{TMPDIR:-/tmp}}/l.sock"; echo own=$?; '
              f"{PROBE} connect-unix {ws}/planted.sock; echo planted=$?")
    r = cordon.run(["/bin/sh", "-c", script], "--ro", f"{d}:/mnt/d", "-w", w, *GATEWAY)
    codes = dict(line.split("=") for line in r.out.split() if "=" in line)
    refused = expect(cordon, REFUSED)
    assert int(codes.get("own", -1)) in refused, f"{r}"
    assert int(codes.get("planted", -1)) in refused, f"{r}"
    assert srv.got() == 0, "the host's server received a connection"


def test_host_socket_through_proc_and_relative_paths(cordon, servers):
    d = hostdir_for(cordon, "binds")
    srv = servers(d / "host.sock")
    script = (f"cd /mnt/d && {PROBE} connect-unix host.sock; echo rel=$?; "
              f"{PROBE} connect-unix /proc/self/root/mnt/d/host.sock; echo root=$?; "
              f"{PROBE} connect-unix /proc/self/cwd/host.sock; echo cwd=$?; "
              f"{PROBE} connect-unix /proc/$$/cwd/host.sock; echo pidcwd=$?; "
              f"{PROBE} connect-unix ../$(basename $PWD)/./host.sock; echo dots=$?")
    r = cordon.run(["/bin/sh", "-c", script], "--ro", f"{d}:/mnt/d", *GATEWAY)
    codes = {k: int(v) for k, v in (line.split("=") for line in r.out.split() if "=" in line)}
    assert set(codes) == {"rel", "root", "cwd", "pidcwd", "dots"}, f"{r}"
    for k in ("rel", "dots"):
        assert codes[k] in expect(cordon, REFUSED), (k, r)
    for k in ("root", "cwd", "pidcwd"):
        # /proc/self/root/mnt/d is no path at the process level: /mnt/d is the host's own
        ok = expect(cordon, REFUSED_MAGIC) + ((errno.ENOENT,) if cordon.level == "process" else ())
        assert codes[k] in ok, (k, r)
    assert srv.got() == 0, "the host's server received a connection"


def test_host_abstract_socket(cordon, abstract_listener):
    r = cordon.probe("connect-abstract", abstract_listener.name, opts=GATEWAY)
    assert_errno(r, *expect(cordon, REFUSED_ABSTRACT))
    time.sleep(0.3)
    assert abstract_listener.count() == 0, "the host's abstract listener accepted a connection"


OWN_SOCKET = r"""
import os, socket, sys
where = os.path.abspath(sys.argv[1])
os.chdir(where)
for kind in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
    path = os.path.join(where, "own-%d.sock" % kind)
    l = socket.socket(socket.AF_UNIX, kind); l.bind(path); l.listen()
    c = socket.socket(socket.AF_UNIX, kind); c.connect(path)
    a, _ = l.accept(); c.send(b"ping"); assert a.recv(4) == b"ping"
    r = socket.socket(socket.AF_UNIX, kind); r.connect(os.path.basename(path))  # relative
    a2, _ = l.accept(); a2.send(b"pong"); assert r.recv(4) == b"pong"
    n = socket.socket(socket.AF_UNIX, kind | socket.SOCK_NONBLOCK); n.connect(path)
    l.accept()
abs_name = "\0cordon-own-" + str(os.getpid())
la = socket.socket(socket.AF_UNIX); la.bind(abs_name); la.listen()
ca = socket.socket(socket.AF_UNIX)
try:
    ca.connect(abs_name); la.accept(); print("abstract ok")
except PermissionError:
    print("abstract refused")
print("own ok")
"""


@pytest.mark.parametrize("where", ["tmp", "workspace"])
def test_own_socket_works(cordon, where):
    """A server the command runs itself, in its /tmp or its (scratch) workspace, is
    reached. A host workspace takes no socket at all (test_workspace_trust)."""
    at = "." if where == "workspace" else "${TMPDIR:-/tmp}"
    r = cordon.run(["/bin/sh", "-c", f'exec python3 -c \'{OWN_SOCKET}\' "{at}"'])
    assert r.status == 0, f"{r}"
    assert "own ok" in r.out, f"{r}"
    # The process level shares the host's abstract namespace: the keeper refuses
    # every abstract connect there (Landlock scopes them, but not past a keeper).
    want = "abstract refused" if cordon.level == "process" else "abstract ok"
    assert want in r.out, f"{r}"


def policy_file(cordon, text):
    d = cordon.hostdir("pol")
    p = d / "policy.yaml"
    p.write_text(text)
    os.chmod(p, 0o644)
    return p


def test_listed_socket_works(cordon, servers):
    d = hostdir_for(cordon, "socks")
    listed = servers(d / "listed.sock")
    other = servers(d / "other.sock")
    pol = policy_file(cordon, f"version: 1\nfilesystem:\n  unix_sockets: [{d}/listed.sock]\n")
    if cordon.level == "microvm":
        r = cordon.probe("connect-unix", f"{d}/listed.sock", opts=["-p", pol])
        assert_cordon_refused(r, "unix_sockets", "microvm")
        assert listed.got() == 0
        return
    r = cordon.probe("connect-unix", f"{d}/listed.sock", opts=["-p", pol])
    assert r.status == 0, f"{r}"
    assert wait_until(lambda: listed.accepted == 1, 10), "the listed socket saw no connection"
    # The listed socket alone: its neighbour, bound in with the directory, stays refused.
    r = cordon.probe("connect-unix", "/mnt/d/other.sock",
                     opts=["-p", pol, "--ro", f"{d}:/mnt/d", *GATEWAY])
    assert_errno(r, *expect(cordon, REFUSED))
    assert other.got() == 0, "an unlisted host socket received a connection"


def test_listed_path_not_a_socket_refused(cordon):
    d = hostdir_for(cordon, "socks")
    (d / "plain").write_text("x")
    pol = policy_file(cordon, f"version: 1\nfilesystem:\n  unix_sockets: [{d}/plain]\n")
    r = cordon.raw("run", "-p", pol, "--", "true")
    assert_cordon_refused(r, "unix_sockets", f"{d}/plain")


def test_policy_check_shows_unix_sockets(cordon):
    pol = policy_file(cordon, "version: 1\nfilesystem:\n  unix_sockets: [/run//x.sock]\n")
    r = cordon.raw("policy", "check", pol)
    assert r.status == 0, f"{r}"
    assert json.loads(r.out)["policy"]["filesystem"]["unix_sockets"] == ["/run/x.sock"], f"{r}"


def test_check_names_unix_sockets(cordon):
    r = cordon.raw("check")
    assert r.status == 0, f"{r}"
    notes = [line for line in r.out.splitlines() if "unix sockets:" in line]
    assert len(notes) == 4 and all("filesystem.unix_sockets" in n for n in notes), r.out
