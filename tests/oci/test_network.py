"""
cordon-oci's network boundary under containerd: the container's egress goes
through cordon's gateway, whose every decision is in the audit chain with
the container's id, and a network namespace made beforehand (as CNI makes a
pod's, here with `ip netns add` and a veth to a server namespace of the
test's own) can be joined without its routes becoming a way around the
gateway: the egress lock refuses a direct connection, and the server sees
nothing.
"""

import os
import socket
import subprocess
import threading
import uuid

import pytest

from conftest import need, wait_for

EGRESS = ("--annotation", "run.cordon.policy=egress.yaml")
PROCESS = ("--annotation", "run.cordon.policy=process.yaml")


def proxy_request(url, host):
    """A shell line sending one proxied GET to the gateway's door; prints the status line."""
    return (f"printf 'GET {url} HTTP/1.1\\r\\nHost: {host}\\r\\nConnection: close\\r\\n\\r\\n'"
            " | nc 127.0.0.1 3128 | head -1")


def test_metadata_egress_refused_and_recorded(containerd, rootfs, policies):
    r = containerd.run(rootfs, "sh", "-c",
                       "env | grep -c '^HTTP_PROXY=http://127.0.0.1:3128$';"
                       + proxy_request("http://169.254.169.254/latest/meta-data/",
                                       "169.254.169.254")
                       + "; nc -w 3 169.254.169.254 80 </dev/null; echo direct=$?", opts=EGRESS)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "1"
    assert "403" in lines[1], r.stdout
    assert "direct=1" in r.stdout
    refused = [e for e in policies.events("egress.decision")
               if e.get("container") == r.name and e.get("host") == "169.254.169.254"]
    assert refused and refused[0]["allowed"] is False


@pytest.fixture
def pod_netns():
    """A pod's network namespace, as CNI leaves it: an interface and routes out, to a server
    namespace of the test's own (TEST-NET-1 and the metadata address, nothing else)."""
    need(subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0,
         "no ip netns here")
    tag = uuid.uuid4().hex[:6]
    pod, srv = f"cordon-pod-{tag}", f"cordon-srv-{tag}"
    va, vb = f"cp{tag}", f"cs{tag}"
    cmds = [
        ["ip", "netns", "add", pod], ["ip", "netns", "add", srv],
        ["ip", "link", "add", va, "netns", pod, "type", "veth", "peer", "name", vb, "netns", srv],
        ["ip", "-n", pod, "addr", "add", "192.0.2.1/24", "dev", va],
        ["ip", "-n", srv, "addr", "add", "192.0.2.2/24", "dev", vb],
        ["ip", "-n", srv, "addr", "add", "169.254.169.254/32", "dev", vb],
        ["ip", "-n", pod, "link", "set", va, "up"], ["ip", "-n", srv, "link", "set", vb, "up"],
        ["ip", "-n", pod, "link", "set", "lo", "up"], ["ip", "-n", srv, "link", "set", "lo", "up"],
        ["ip", "-n", pod, "route", "add", "default", "via", "192.0.2.2"],
    ]
    try:
        for c in cmds:
            subprocess.run(c, check=True, capture_output=True)
        # The server: accepts on port 80 of both addresses and counts what arrives.
        server = subprocess.Popen(
            ["ip", "netns", "exec", srv, "/usr/bin/python3", "-c",
             "import socket,sys\n"
             "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "s.bind(('0.0.0.0', 80)); s.listen(8); print('ready', flush=True)\n"
             "while True:\n"
             "    c,a=s.accept(); print('accepted', a[0], flush=True); c.close()\n"],
            stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready"
        # The namespace does lead out: from the pod's namespace itself, a connect lands.
        probe = subprocess.run(["ip", "netns", "exec", pod, "/usr/bin/python3", "-c",
                                "import socket; socket.create_connection(('192.0.2.2', 80), 5)"],
                               capture_output=True, text=True)
        assert probe.returncode == 0, probe.stderr
        assert server.stdout.readline().startswith("accepted")
        server.lines = []
        server.pod = pod
        threading.Thread(target=lambda: [server.lines.append(l) for l in server.stdout],
                         daemon=True).start()
        yield f"/var/run/netns/{pod}", server, pod
    finally:
        if "server" in locals():
            server.kill()
            server.wait()
        subprocess.run(["ip", "netns", "del", pod], capture_output=True)
        subprocess.run(["ip", "netns", "del", srv], capture_output=True)


def accepted_lines(server):
    """What the server accepted from the container: everything before a last connection of
    the test's own from the pod's namespace (so a late line cannot be missed)."""
    subprocess.run(["ip", "netns", "exec", server.pod, "/usr/bin/python3", "-c",
                    "import socket; socket.create_connection(('192.0.2.2', 80), 5)"], check=True)
    assert wait_for(lambda: server.lines, 30)
    return [l for l in server.lines[:-1] if l.startswith("accepted")]


def test_joined_netns_has_no_way_around_the_gateway(containerd, rootfs, pod_netns, policies):
    path, server, pod = pod_netns
    r = containerd.run(rootfs, "sh", "-c",
                       "nc -w 3 192.0.2.2 80 </dev/null; echo other=$?;"
                       " nc -w 3 169.254.169.254 80 </dev/null; echo meta=$?;"
                       + proxy_request("http://169.254.169.254/", "169.254.169.254")
                       + "; readlink /proc/self/ns/net",
                       opts=(*EGRESS, "--with-ns", f"network:{path}"))
    assert r.returncode == 0, r.stderr
    assert "other=1" in r.stdout and "meta=1" in r.stdout, r.stdout
    assert "Operation not permitted" in r.stderr or "not permitted" in r.stdout + r.stderr
    assert "403" in r.stdout
    netns_inode = os.stat(path).st_ino
    assert f"net:[{netns_inode}]" in r.stdout, "the container is not in the pod's namespace"
    assert accepted_lines(server) == [], "a connection reached the server"
    refused = [e for e in policies.events("egress.decision") if e.get("container") == r.name]
    assert refused and not refused[-1]["allowed"]
    # The namespace is the pod's: cordon's route is gone from it once the container is.
    routes = subprocess.run(["ip", "-n", pod, "route", "show", "table", "local"],
                            capture_output=True, text=True).stdout
    assert "198.18.0.0/15" not in routes


def test_joined_netns_without_gateway_policy_is_locked_too(containerd, rootfs, pod_netns):
    path, server, _ = pod_netns
    r = containerd.run(rootfs, "sh", "-c", "nc -w 3 192.0.2.2 80 </dev/null; echo other=$?",
                       opts=("--with-ns", f"network:{path}"))
    assert r.returncode == 0, r.stderr
    assert "other=1" in r.stdout
    assert accepted_lines(server) == []


def test_exec_in_joined_netns_is_locked(containerd, rootfs, pod_netns):
    path, server, _ = pod_netns
    r = containerd.run(rootfs, "sleep", "1000", detach=True, check=True,
                       opts=("--with-ns", f"network:{path}"))
    try:
        e = containerd.ctr("task", "exec", "--exec-id", "x", r.name, "sh", "-c",
                           "nc -w 3 192.0.2.2 80 </dev/null; echo other=$?", check=False)
        assert "other=1" in e.stdout, e.stdout + e.stderr
        assert accepted_lines(server) == []
    finally:
        containerd.remove(r.name)


@pytest.mark.parametrize("level", ["namespace", "process"])
@pytest.mark.parametrize("ns", ["network", "ipc"])
def test_joining_the_hosts_own_namespace_is_refused(containerd, rootfs, policies, ns, level):
    """A namespace joined by path must be a pod's, never the host's: in the
    host's network namespace loopback is the host's, where the egress lock lets
    127.0.0.0/8 through to every service listening there (and cordon's door and
    route would be made on the host); the host's IPC namespace holds the host's
    shared memory. Refused at create, as a spec without a namespace is; the
    host's listener sees nothing."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    try:
        r = containerd.run(rootfs, "sh", "-c", f"timeout 5 nc 127.0.0.1 {port} </dev/null; echo lo=$?",
                           opts=("--with-ns", f"{ns}:/proc/{os.getpid()}/ns/{ns[:3]}",
                                 *(PROCESS if level == "process" else ())))
        assert r.returncode != 0 and "lo=" not in r.stdout, (r.stdout, r.stderr)
        assert "host's own" in r.stderr, r.stderr
        with pytest.raises(socket.timeout):
            srv.accept()
    finally:
        srv.close()
