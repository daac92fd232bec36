"""
The microvm level: the command runs under a guest kernel of its own (QEMU's
microvm machine). On this machine kind /dev/kvm is PVM, which boots no
stock kernel, so every test here runs under TCG (QEMU's emulator) and says
so with --accel tcg; a policy that does not allow TCG is refused.

Serial by nature (each test boots or restores real guests on two shared
cores); the whole file is CI's microvm subset (~2 minutes here).
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

import egress_servers as es
from conftest import BUILD, marker, pids_with, wait_until
from serve_util import Daemon
from test_secrets import EG, PLACEHOLDER, Net, values

TCG = ["-l", "microvm", "--accel", "tcg"]
KERNEL = pathlib.Path(os.environ.get("CORDON_GUEST_KERNEL",
                                     "/var/cache/cordon/guest-kernel/current")) / "vmlinux"


@pytest.fixture
def level():
    """This file's runs name their level themselves: the suite's level parameter
    (levels.py) would only run each test again, and rewrite its binds."""
    return "namespace"


@pytest.fixture(autouse=True)
def guest_kernel():
    if not KERNEL.exists():
        pytest.skip("no guest kernel (make guest-kernel builds it)")


def live_qemu(word):
    """Running (not zombie) QEMU processes with WORD in their command line."""
    found = []
    for pid in pids_with(word):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2]
        if comm.startswith("qemu-system") and state != "Z":
            found.append(pid)
    return found


def marked_dir(cordon):
    """A workspace whose path marks the run's QEMU (its 9p share names it)."""
    return cordon.hostdir(marker())


def snapshots_dir(cordon):
    d = cordon.hostdir("snapshots")
    return {"CORDON_MICROVM_SNAPSHOTS": str(d)}, d


# --- running commands -------------------------------------------------------


def test_true_and_python(cordon):
    r = cordon.run(["true"], *TCG, bind_probe=False)
    assert r.status == 0, r
    b = r.result["boundary"]
    assert b["accel"] == "tcg" and isinstance(b["restored"], bool), r.result
    assert "not a hypervisor boundary" in b["note"], b
    assert len(b["kernel_digest"]) == 64 and len(b["initramfs_digest"]) == 64, b
    r = cordon.run(["python3", "-c", "import sys, os; print(sys.version_info[0], os.getuid())"],
                   *TCG, bind_probe=False)
    assert r.status == 0, r
    assert r.out.split()[0] == "3", r


def test_exit_status_stdin_and_stderr(cordon):
    # --quiet: cordon's own notices (a limit held per process) share stderr.
    r = cordon.run(["sh", "-c", "tr a-z A-Z; echo oops >&2; exit 7"], *TCG, "--quiet",
                   input=b"hello\n", bind_probe=False)
    assert r.status == 7, r
    assert r.out == "HELLO\n" and r.err.endswith("oops\n"), r
    assert r.result["reason"] == "exited" and r.result["exit_code"] == 7, r.result


def test_not_found(cordon):
    r = cordon.run(["no-such-command-here"], *TCG, bind_probe=False)
    assert r.status == 127, r
    assert "command not found: 'no-such-command-here'" in r.err, r


def test_tcg_needs_the_policy_to_allow_it(cordon):
    m = marker()
    ws = cordon.hostdir(m)
    r = cordon.run(["true"], "-l", "microvm", "-w", ws, bind_probe=False)
    assert r.status == 125, r
    line = r.err.strip()
    assert "\n" not in line, r
    assert "no hardware KVM" in line and "not a hypervisor boundary" in line, r
    assert "microvm.accel: tcg" in line, r
    assert not live_qemu(m)


def test_cordon_check_says_tcg_is_an_emulator(cordon):
    r = cordon.raw("check")
    assert "microvm" in r.out, r
    assert "not a hypervisor boundary" in r.out, r


KVM_SAID = ("/dev/kvm booted a test guest in", "/dev/kvm did not boot a test guest within",
            "no usable /dev/kvm")


def kvm_line(r):
    lines = [l.strip() for l in r.out.splitlines() if l.strip().startswith("kvm:")]
    assert len(lines) == 1, r
    return lines[0]


def test_kvm_is_probed_by_booting_a_guest_and_the_verdict_kept(root_cordon):
    """/dev/kvm alone decides nothing (here it is PVM, which boots no stock
    kernel): cordon boots a test guest under it once, keeps the verdict per
    kernel, QEMU and host boot, and trusts no verdict another user could write."""
    c = root_cordon
    env, d = snapshots_dir(c)
    first = kvm_line(c.raw("check", env=env))
    assert any(s in first for s in KVM_SAID), first
    verdicts = list(d.glob("kvm-*.verdict"))
    if "no usable /dev/kvm" in first:
        assert verdicts == []  # nothing was probed
        return
    assert len(verdicts) == 1, verdicts
    kept = verdicts[0].read_text()
    assert kept.split(" ", 1)[1].strip() in first, (kept, first)
    stamp = verdicts[0].stat().st_mtime_ns
    assert kvm_line(c.raw("check", env=env)) == first
    assert verdicts[0].stat().st_mtime_ns == stamp, "the verdict was probed again"
    assert not live_qemu("kvm"), "the probe's QEMU was left running"

    # A verdict someone else could have written is not believed: probed again.
    for mode, owner in ((0o666, 0), (0o644, 65534)):
        verdicts[0].write_text("yes forged by a neighbour\n")
        os.chmod(verdicts[0], mode)
        os.chown(verdicts[0], owner, owner)
        again = kvm_line(c.raw("check", env=env))
        assert "forged" not in again and any(s in again for s in KVM_SAID), again
        assert "forged" not in verdicts[0].read_text()


# --- the filesystem ------------------------------------------------------


def test_workspace_write_visible_outside_write_not(cordon):
    ws = cordon.hostdir()
    name = marker()
    script = (f"echo inside > /workspace/{name}.txt; "
              f"echo x > /usr/{name} 2>/dev/null && echo usr-writable; "
              f"echo x > /etc/{name} && echo guest-etc-ok; "
              f"echo x > /tmp/{name} && echo guest-tmp-ok")
    r = cordon.run(["sh", "-c", script], *TCG, "-w", ws, bind_probe=False)
    assert r.status == 0, r
    assert (ws / f"{name}.txt").read_text() == "inside\n"
    assert "usr-writable" not in r.out, r
    # Written inside the guest's own root and /tmp: nothing of it on the host.
    assert not pathlib.Path(f"/usr/{name}").exists()
    assert not pathlib.Path(f"/etc/{name}").exists()
    assert not pathlib.Path(f"/tmp/{name}").exists()
    assert "guest-tmp-ok" in r.out, r


def test_protected_workspace_entries_stay_read_only(cordon):
    ws = cordon.hostdir()
    (ws / ".bashrc").write_text("orig\n")
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "settings.json").write_text("{}\n")
    for p in (ws / ".bashrc", ws / ".vscode", ws / ".vscode" / "settings.json"):
        os.chown(p, cordon.ident.uid, cordon.ident.gid)
    r = cordon.run(["sh", "-c", "echo evil >> .bashrc; echo evil > .vscode/settings.json; "
                                "mkdir .vscode/x; echo ok > fine.txt; true"],
                   *TCG, "-w", ws, bind_probe=False)
    assert r.status == 0, r
    assert (ws / ".bashrc").read_text() == "orig\n"
    assert (ws / ".vscode" / "settings.json").read_text() == "{}\n"
    assert not (ws / ".vscode" / "x").exists()
    assert (ws / "fine.txt").read_text() == "ok\n"
    assert "Read-only file system" in r.err, r


def test_read_only_bind_and_file_bind(cordon):
    d = cordon.hostdir()
    (d / "data.txt").write_text("shared\n")
    (d / "sibling.txt").write_text("not for the guest\n")
    os.chmod(d / "data.txt", 0o644)
    # d is beneath /tmp: its bind must land on the guest's /tmp, not under it.
    r = cordon.run(["sh", "-c", f"cat /data/data.txt; cat /one.txt; cat {d}/data.txt; ls /; "
                                "(echo x > /data/new) 2>/dev/null && echo bind-writable; true"],
                   *TCG, "--ro", f"{d}:/data", "--ro", f"{d / 'data.txt'}:/one.txt",
                   "--ro", d, bind_probe=False)
    assert r.status == 0, r
    assert r.out.startswith("shared\nshared\nshared\n"), r
    assert "bind-writable" not in r.out and not (d / "new").exists(), r
    assert "cordon-share" not in r.out, r  # the file's directory was detached


def test_etc_shows_the_listed_host_entries_only(cordon):
    r = cordon.run(["sh", "-c", "ls /etc; test -s /etc/ssl/certs/ca-certificates.crt && echo ca; "
                                "cat /etc/passwd"], *TCG, bind_probe=False)
    assert r.status == 0, r
    names = r.out.split()
    assert "ld.so.cache" in names and "ssl" in names and "ca" in names, r
    assert "shadow" not in names and "machine-id" not in names, r
    assert "sandbox:x:1000:1000" in r.out and "root:x:0:0" in r.out, r
    host_users = [l.split(":")[0] for l in open("/etc/passwd")]
    assert not [u for u in host_users if u not in ("root", "nobody") and f"\n{u}:" in r.out], r


# The agent's own view stays outside the command's root: the ports it talks to
# the host on (control, egress), the guest's devtmpfs and the initramfs.
AGENT_PATHS = [
    ("/dev/vport0p1", "the control port"),
    ("/dev/vport0p2", "the egress port"),
    ("/dev/kmsg", "the guest kernel's log"),
    ("/dev/ttyS0", "the serial console"),
    ("/init", "the agent's binary"),
    ("/proc/1/root/dev/vport0p1", "the agent's root, through its pid"),
    ("/proc/1/fd/3", "the agent's descriptors"),
]


def test_agent_ports_and_initramfs_out_of_reach(cordon):
    """Each path is tried by the command as it runs (a write open, then a read
    open); a host-side frame it could forge would end or steer the call."""
    script = "; ".join(
        f"if (: >> {p}) 2>/dev/null || (: < {p}) 2>/dev/null; then echo OPEN {p}; fi"
        for p, _ in AGENT_PATHS)
    r = cordon.run(["sh", "-c", script + "; ls /proc | grep -cx '[0-9]*'; echo end"],
                   *TCG, bind_probe=False)
    assert r.status == 0 and r.out.endswith("end\n"), r
    opened = [l for l in r.out.splitlines() if l.startswith("OPEN")]
    assert not opened, f"reachable from the command: {opened}\n{r}"
    # The command's own shell and its children only: no guest kernel thread, no agent.
    assert int(r.out.splitlines()[-2]) < 5, r
    assert r.result["reason"] == "exited", r.result


# --- egress -------------------------------------------------------------------


@pytest.fixture
def web():
    s = es.Server("web", "127.0.0.2")
    yield s
    s.close()


def test_egress_allowed_and_refused(cordon, web):
    other = es.Server("other", "127.0.0.2")
    try:
        curl = "curl -sS --max-time 20 -o /dev/null -w '%{http_code}\\n'"
        cmd = ["sh", "-c", f"{curl} http://example.test:{web.port}/hello; "
                           f"{curl} http://example.test:{other.port}/no"]
        r = cordon.run(cmd, *TCG, "--allow", f"example.test:{web.port}",
                       "--allow-private", "127.0.0.2/32", "--resolve", "example.test=127.0.0.2",
                       bind_probe=False)
        assert r.status == 0, r
        assert r.out.split() == ["200", "403"], r
        assert [q["path"] for q in web.requests] == ["/hello"]
        assert other.count() == 0, other.requests  # refused: never connected
        assert r.result["egress"]["allowed"] == 1 and r.result["egress"]["refused"] == 1, r.result
    finally:
        other.close()


UPLOAD_BESIDE = r"""
import json, socket, sys, threading, time
port = sys.argv[1]
def proxy(head):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
    s.sendall(head.encode())
    return s
got, stop = [0], threading.Event()
def download():
    s = proxy(f"GET http://example.test:{port}/big/400000000 HTTP/1.1\r\nHost: x\r\n\r\n")
    while not stop.is_set() and (d := s.recv(1 << 20)):
        got[0] += len(d)
t = threading.Thread(target=download)
t.start()
while got[0] < 1_000_000:  # the download flows
    time.sleep(0.01)
before, n = got[0], 4_000_000
s = proxy(f"POST http://example.test:{port}/x HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n")
s.sendall(b"u" * n)
answer = b""
while d := s.recv(65536):
    answer += d
during = got[0] - before
stop.set()
t.join()
print(json.dumps({"answer": answer.partition(b"\r\n\r\n")[2].decode(), "during": during}))
"""


def test_an_upload_beside_a_download_gets_its_share(cordon, web):
    # The guest reads each client once a round; it took up to 64 of the
    # host's frames a round (4 MB of a download read as fast as it comes)
    # for each 64 KiB of an upload beside it: 30 MB up took 24 s, 0.5 s
    # alone (found by a review). Counted in bytes, not seconds: while 4 MB
    # go up, the download may take a few times that, not 64 times.
    d = cordon.hostdir("up")
    (d / "beside.py").write_text(UPLOAD_BESIDE)
    os.chmod(d / "beside.py", 0o644)
    r = cordon.run(["python3", "/opt/up/beside.py", str(web.port)], *TCG,
                   "--allow", f"example.test:{web.port}", "--allow-private", "127.0.0.2/32",
                   "--resolve", "example.test=127.0.0.2", "--ro", f"{d}:/opt/up",
                   bind_probe=False, timeout=180)
    assert r.status == 0, r
    out = json.loads(r.out)
    assert out["answer"] == "hello from web\n" and out["during"] < 16 * 4_000_000, out


def test_no_network_without_the_gateway(cordon, web):
    r = cordon.run(["sh", "-c", f"curl -sS --max-time 5 --noproxy '*' http://127.0.0.2:{web.port}/;"
                                " echo curl=$?"], *TCG, bind_probe=False)
    assert "curl=7" in r.out or "curl=6" in r.out or "curl=28" in r.out, r
    assert web.count() == 0


# --- limits and cleanup -------------------------------------------------------


def test_timeout_kills_qemu(cordon):
    ws = marked_dir(cordon)
    t0 = time.monotonic()
    r = cordon.run(["sleep", "100"], *TCG, "-w", ws, "-t", "3s", bind_probe=False)
    assert r.status == 124 and r.result["reason"] == "timeout", r
    assert time.monotonic() - t0 < 20
    assert wait_until(lambda: not live_qemu(ws.name), 5), live_qemu(ws.name)


def test_output_limit(cordon):
    r = cordon.run(["sh", "-c", "yes"], *TCG, "--output", "64K", "-t", "60s", bind_probe=False)
    assert r.result["reason"] == "output_limit", r.result
    assert len(r.out) <= 64 * 1024


def test_kill9_of_cordon_leaves_no_qemu(cordon):
    ws = marked_dir(cordon)
    p = cordon.popen(["sleep", "100"], *TCG, "-w", ws)
    try:
        assert wait_until(lambda: live_qemu(ws.name), 30), "QEMU never started"
        time.sleep(1.0)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        gone = wait_until(lambda: not live_qemu(ws.name), 10)
        assert gone, f"QEMU left running: {live_qemu(ws.name)}"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for pid in live_qemu(ws.name):
            os.kill(pid, signal.SIGKILL)


def test_qemu_is_confined_like_a_command(cordon):
    """QEMU itself runs under cordon's own syscall filter (the run's, as at the
    namespace level) beneath its -sandbox, with no_new_privs, and in a
    network namespace of its own: a QEMU the guest took over is still boxed."""
    ws = marked_dir(cordon)
    p = cordon.popen(["sh", "-c", "touch /workspace/up; exec sleep 100"], *TCG, "-w", ws)
    try:
        # The command runs: QEMU is past its own setup (-sandbox included).
        assert wait_until(lambda: (ws / "up").exists(), 60), "the guest never ran the command"
        pid = live_qemu(ws.name)[0]
        status = dict(line.split(":", 1) for line in
                      pathlib.Path(f"/proc/{pid}/status").read_text().splitlines())
        assert status["Seccomp"].strip() == "2", status["Seccomp"]
        # QEMU's -sandbox, and cordon's beneath it.
        assert int(status["Seccomp_filters"]) >= 2, status["Seccomp_filters"]
        assert status["NoNewPrivs"].strip() == "1"
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    finally:
        p.kill()
        p.wait()
    assert wait_until(lambda: not live_qemu(ws.name), 10), live_qemu(ws.name)


# --- a hostile guest ------------------------------------------------------


ATTACKS = [
    ("attack-unknown", "unknown type 99"),
    ("attack-oversize", "length 4294967280"),
    ("attack-forged-id", "connection 5000"),
    ("attack-double-ready", "spoke out of turn (frame type 16)"),
    ("attack-second-set", "spoke out of turn (frame type 21)"),
]


@pytest.fixture
def hostile(cordon):
    """The lying agent's initramfs where cordon is told to look, and a
    snapshot directory of its own."""
    d = cordon.hostdir()
    shutil.copy(BUILD / "hostile-guest.cpio", d / "hostile.cpio")
    os.chmod(d / "hostile.cpio", 0o644)
    env, _ = snapshots_dir(cordon)
    env["CORDON_GUEST_INITRAMFS"] = str(d / "hostile.cpio")
    return env


@pytest.mark.parametrize("attack,why", ATTACKS, ids=[a for a, _ in ATTACKS])
def test_hostile_guest_frames_end_the_run(cordon, hostile, attack, why):
    ws = marked_dir(cordon)
    r = cordon.run([attack], *TCG, "-w", ws, "--net", "gateway", "-t", "60s", env=hostile,
                   bind_probe=False, timeout=60)
    assert r.status == 125, r
    assert r.result["reason"] == "setup_error", r.result
    assert why in r.result["error"], r.result
    assert r.out == "", r
    assert wait_until(lambda: not live_qemu(ws.name), 5), live_qemu(ws.name)


SETUP_ATTACKS = [
    ("attack-setup-unknown", "unknown type 99"),
    ("attack-setup-stdout", "spoke out of turn (frame type 17)"),
    ("attack-setup-escapes", "setup lie"),
]


@pytest.mark.parametrize("attack,why", SETUP_ATTACKS, ids=[a for a, _ in SETUP_ATTACKS])
def test_hostile_guest_setup_ends_the_run_before_the_command(cordon, hostile, attack, why):
    """A guest that lies while the setup goes in (a bind's guest path names
    the attack): the run ends at its preparation with the reason, printable."""
    ws = marked_dir(cordon)
    ro = cordon.hostdir()
    r = cordon.run(["echo", "never"], *TCG, "-w", ws, "--ro", f"{ro}:/{attack}", "-t", "60s",
                   env=hostile, bind_probe=False, timeout=60)
    assert r.status == 125, r
    assert r.result["reason"] == "setup_error", r.result
    assert why in r.result["error"], r.result
    assert all(0x20 <= ord(c) < 0x7f for c in r.result["error"]), r.result
    assert r.out == "" and "\x1b" not in r.err and "\r" not in r.err, r
    assert wait_until(lambda: not live_qemu(ws.name), 5), live_qemu(ws.name)


def test_hostile_guest_error_text_is_printable(cordon, hostile):
    r = cordon.run(["attack-escapes"], *TCG, "-t", "60s", env=hostile, bind_probe=False)
    assert r.status == 125, r
    msg = r.result["error"]
    assert "fake error" in msg, r.result
    assert all(0x20 <= ord(c) < 0x7f for c in msg), repr(msg)
    assert "\x1b" not in r.err and "\r" not in r.err, repr(r.err)


def test_hostile_guest_flood_meets_the_output_limit(cordon, hostile):
    r = cordon.run(["attack-flood"], *TCG, "--output", "256K", "-t", "60s", env=hostile,
                   bind_probe=False)
    assert r.result["reason"] == "output_limit", r.result
    assert len(r.out) <= 256 * 1024


# --- snapshots ------------------------------------------------------------------


def restored(r):
    assert r.status == 0, r
    return r.result["boundary"]["restored"]


def snapshot_layout(snap):
    """(header length, memory offset) of a snapshot: magic, digest, "ram <hex>"."""
    with open(snap, "rb") as f:
        head = f.read(112)
    lines = head.split(b"\n")
    assert lines[0] == b"cordon-microvm-snapshot 2" and len(lines[1]) == 64, head
    assert lines[2].startswith(b"ram "), head
    return len(lines[0]) + len(lines[1]) + len(lines[2]) + 3, int(lines[2][4:], 16)


def copy_sparse(src, dst):
    """The memory image is sparse (tens of MB of data in about a GB): keep it so."""
    subprocess.run(["cp", "--sparse=always", str(src), str(dst)], check=True)


def test_snapshot_saved_validated_and_replaced(root_cordon):
    c = root_cordon
    env, d = snapshots_dir(c)
    assert not restored(c.run(["true"], *TCG, env=env, bind_probe=False))
    snaps = list(d.glob("*.snap"))
    assert len(snaps) == 1, snaps
    snap = snaps[0]
    head_len, ram_at = snapshot_layout(snap)
    # The devices' stream is small; the memory is an image with holes.
    assert ram_at % 4096 == 0 and ram_at < (1 << 20), ram_at
    assert os.stat(snap).st_blocks * 512 < os.stat(snap).st_size // 4, os.stat(snap)
    assert restored(c.run(["true"], *TCG, env=env, bind_probe=False))
    good = c.hostdir("good") / "good.snap"
    copy_sparse(snap, good)

    def damaged(offsets, byte=None, size=None):
        copy_sparse(good, snap)
        with open(snap, "r+b") as f:
            for at in offsets:
                f.seek(at)
                old = f.read(1)
                f.seek(at)
                f.write(bytes([byte if byte is not None else old[0] ^ 0xFF]))
            if size is not None:
                f.truncate(size)

    # A damaged device stream: QEMU refuses it, the run boots cold and saves anew.
    damaged(range(head_len + 16, ram_at, 512))
    r = c.run(["echo", "still runs"], *TCG, env=env, bind_probe=False)
    assert not restored(r) and r.out == "still runs\n", r
    assert snapshot_layout(snap) and restored(c.run(["true"], *TCG, env=env, bind_probe=False))

    # A memory image larger than the guest's memory: refused before QEMU reads it.
    damaged([], size=ram_at + (4 << 30) + 4096)
    with open(snap, "r+b") as f:
        f.seek(ram_at + (4 << 30))
        f.write(b"x")
    r = c.run(["echo", "still runs"], *TCG, env=env, bind_probe=False)
    assert not restored(r) and r.out == "still runs\n", r

    # A memory offset that is not a page's, or past the file: not even tried.
    for field in (b"ram 0000000000000ffe", b"ram 00000000ffffffff", b"ram 00000000000000zz"):
        copy_sparse(good, snap)
        with open(snap, "r+b") as f:
            f.seek(head_len - len(field) - 1)
            f.write(field)
        assert not restored(c.run(["true"], *TCG, env=env, bind_probe=False))

    # A header for another kernel/initramfs/QEMU: not even tried.
    damaged(range(head_len - 22 - 64, head_len - 22), byte=ord("0"))
    assert not restored(c.run(["true"], *TCG, env=env, bind_probe=False))

    # One that someone else could have written: guest memory is code, not trusted.
    copy_sparse(good, snap)
    os.chmod(snap, 0o666)
    assert not restored(c.run(["true"], *TCG, env=env, bind_probe=False))


def test_restored_clones_draw_different_random_bytes(root_cordon):
    c = root_cordon
    env, _ = snapshots_dir(c)
    c.run(["true"], *TCG, env=env, bind_probe=False)  # saves the snapshot
    draw = ["python3", "-c", "import os, random; print(os.urandom(16).hex(), random.random())"]
    outs = []
    for _ in range(2):
        r = c.run(draw, *TCG, env=env, bind_probe=False)
        assert restored(r), r.result
        outs.append(r.out)
    assert outs[0] != outs[1], outs
    assert outs[0].split()[0] != outs[1].split()[0], outs


def test_audit_records_the_boundary(cordon):
    d = cordon.hostdir()
    log = d / "audit.jsonl"
    r = cordon.run(["true"], *TCG, "--audit", log, bind_probe=False)
    assert r.status == 0, r
    starts = [json.loads(l) for l in log.read_text().splitlines() if '"run.start"' in l]
    assert starts, log.read_text()
    ev = starts[-1]
    b = (ev.get("data") or ev).get("boundary") or ev.get("boundary")
    assert b and b["accel"] == "tcg" and "restored" in b and len(b["kernel_digest"]) == 64, ev


@pytest.fixture(scope="module")
def secrets_net():
    with es.scratch_net("cit-secrets-", Net) as n:
        yield n


def test_secret_swapped_into_tls_by_the_gateway(cordon, secrets_net):
    """The run's CA reaches the guest's trust store, so a secret bound to an
    HTTPS host works here as at the other levels: the guest holds only the
    placeholder, the server gets the value."""
    net = secrets_net
    v = values("A")
    reqs = [[net.url(net.a_tls), {"X-Api-Key": "{A}"}]]
    cmd = ["sh", "-c", f"echo \"$A\"; python3 {EG}/req.py '{json.dumps(reqs)}'; "
                       "test -w /etc/cordon/run-ca.pem && echo ca-writable; true"]
    r = cordon.run(cmd, *TCG, *net.opts("--secret", f"A=env:VAL_A@{net.hosts(net.a_tls)}"),
                   env={"SSL_CERT_FILE": str(net.ca), "VAL_A": v["A"]}, bind_probe=False)
    assert r.status == 0, r
    lines = r.out.splitlines()
    assert PLACEHOLDER.fullmatch(lines[0]), r
    got = json.loads(lines[1])
    assert got["status"] == 200, got
    assert net.a_tls.requests[-1]["headers"]["X-Api-Key"] == v["A"], net.a_tls.requests
    assert "ca-writable" not in r.out, r
    assert v["A"].encode() not in r.stdout + r.stderr
    assert [d.get("intercepted") for d in r.result["egress"]["recent"]] == [True], r.result


# --- the daemon's pool ------------------------------------------------------------


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_daemon_pool_holds_restored_guests_paused(cordon):
    """`cordon serve --pool` at this level keeps restored guests that use no
    CPU while they wait, and each call takes one of them."""
    env, _ = snapshots_dir(cordon)
    assert cordon.run(["true"], *TCG, env=env, bind_probe=False).status == 0  # the snapshot
    mark = marked_dir(cordon)  # its path is in the pooled QEMU's command line
    pol = cordon.hostdir() / "microvm.yaml"
    pol.write_text(f"version: 1\nisolation: microvm\nmicrovm:\n  accel: tcg\n"
                   f"filesystem:\n  read_only: [{mark}]\n")
    os.chmod(pol.parent, 0o755)
    os.chmod(pol, 0o644)
    d = Daemon(cordon, "--policy", pol, "--pool", "1", env=env)
    try:
        assert d.pool_ready(1, timeout=120), "the pool never filled"
        qemus = live_qemu(mark.name)
        assert len(qemus) == 1, qemus
        before = cpu_ticks(qemus[0])
        time.sleep(2)  # long enough for a running idle guest's timer ticks to show
        assert cpu_ticks(qemus[0]) - before <= 1, "a pooled guest ran while it waited"
        c = d.connect(timeout=120)
        # The pooled guest was warmed by a throwaway true before the call:
        # nothing of it is left (no process; in /tmp only HOME and the bind).
        r = c.result("run", {"argv": ["sh", "-c", f"uname -r; ls {mark}; echo --; ls -A /tmp;"
                                      " echo --; ls -d /proc/[0-9]* | wc -l"]})
        assert r["exit_code"] == 0 and r["stdout"].startswith("6."), (r["stderr"], r)
        _, tmp, procs = r["stdout"].split("--\n")
        assert sorted(tmp.split()) == sorted(["home", mark.relative_to("/tmp").parts[0]]), r["stdout"]
        assert int(procs) <= 3, r["stdout"]  # sh, ls, wc
        stats = c.result("stats")
        assert stats["runs"]["pooled"] == 1 and stats["runs"]["cold"] == 0, stats
        c.close()
        assert wait_until(lambda: qemus[0] not in live_qemu(mark.name), 30), \
            "the used guest was not destroyed"
    finally:
        d.stop()
    assert wait_until(lambda: not live_qemu(mark.name), 30), live_qemu(mark.name)


def test_call_files_are_placed_by_the_guests_agent(cordon):
    """The guest's agent writes a call's files beneath /workspace, with their
    modes, as the command's uid, before the command runs; a call whose
    frame (arguments, environment and files) is over the guest's 8 MiB is
    refused with why (125), and no guest is left."""
    from serve_util import Daemon
    mark = marked_dir(cordon)  # its path is in each guest's QEMU command line
    pol = cordon.hostdir() / "microvm.yaml"
    pol.write_text(f"version: 1\nisolation: microvm\nmicrovm:\n  accel: tcg\n"
                   f"filesystem:\n  read_only: [{mark}]\n")
    os.chmod(pol.parent, 0o755)
    os.chmod(pol, 0o644)
    d = Daemon(cordon, "--policy", pol, "--pool", "0")
    try:
        c = d.connect(timeout=120)
        r = c.result("run", {"argv": ["sh", "-c", "stat -c '%n %a %s' main.py d/e/run.sh; "
                                      "./d/e/run.sh; test -O main.py && echo own"],
                             "files": {"main.py": "print(1)\n",
                                       "d/e/run.sh": {"content": "#!/bin/sh\necho ran\n",
                                                      "mode": 0o755}}})
        assert r["exit_code"] == 0, r
        assert r["stdout"] == "main.py 644 9\nd/e/run.sh 755 19\nran\nown\n", r
        ans = c.call("run", {"argv": ["true"], "files": {"big": "x" * (9 << 20)}})
        r = ans["result"]
        assert r["status"] == 125, ans
        assert "microvm: the call (arguments, environment and files) is over the guest's 8 MiB" \
            in r["error"], ans
        assert wait_until(lambda: not live_qemu(mark.name), 30), live_qemu(mark.name)
        c.close()
    finally:
        d.stop()


def test_a_live_session_pauses_its_vm(cordon):
    """session.pause at this level freezes the VM (QEMU and the namespace
    around it: the agent is the guest's, no host process): a CPU loop in the
    guest makes no tick and QEMU uses no CPU while paused, and goes on after
    resume (counted, never timed). An ordinary user's daemon has no freezer
    here: refused, saying so, and the loop runs on."""
    pol = cordon.hostdir() / "microvm.yaml"
    pol.write_text("version: 1\nisolation: microvm\nmicrovm:\n  accel: tcg\n")
    os.chmod(pol.parent, 0o755)
    os.chmod(pol, 0o644)
    d = Daemon(cordon, "--policy", pol, "--pool", "0")
    qemus = []
    try:
        c = d.connect(timeout=120)
        sid = c.result("session.create", {"live": True})["session_id"]
        loop = ("(i=0; while :; do i=$((i+1)); [ $((i % 50)) = 0 ] && echo $i > t.new && "
                "mv t.new ticks; done) >/dev/null 2>&1 &")
        assert wait_until(lambda: "result" in c.call("session.exec", {
            "session_id": sid, "language": "sh", "code": loop}), 120)

        def ticks():
            ans = c.call("session.read_file", {"session_id": sid, "path": "ticks"})
            return int(ans["result"]["content"]) if "result" in ans else 0

        first = ticks()
        assert wait_until(lambda: ticks() > first, 120), "the guest's loop does not run"
        ans = c.call("session.pause", {"session_id": sid})
        if not cordon.root:
            assert ans.get("error", {}).get("code") == -32000, ans
            assert "freezer" in ans["error"]["message"], ans
            now = ticks()
            assert wait_until(lambda: ticks() > now, 120), "the loop stopped unpaused"
            return
        assert ans.get("result") == {"session_id": sid, "paused": True}, ans
        qemus = [p for p in live_qemu("") if d.proc.pid in ancestors(p)]
        assert len(qemus) == 1, qemus
        frozen, cpu = ticks(), cpu_ticks(qemus[0])
        time.sleep(2)
        assert ticks() == frozen, "the guest ran while paused"
        assert cpu_ticks(qemus[0]) == cpu, "QEMU ran while paused"
        assert c.result("session.resume", {"session_id": sid})["paused"] is False
        assert wait_until(lambda: ticks() > frozen, 120), "the guest did not go on"
        assert c.result("session.destroy", {"session_id": sid}) == {"destroyed": True}
    finally:
        d.stop()
    assert not [p for p in live_qemu("") if p in qemus], "the session's QEMU is left"


def ancestors(pid):
    found = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        found.append(pid)
    return found
