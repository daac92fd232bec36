"""
cordon-oci under containerd's own runc shim (io.containerd.runc.v2 with
--runc-binary): what a cluster node does with a RuntimeClass handler whose
BinaryName is cordon-oci. Each test runs a real container from a busybox
root and checks what the workload saw, what the engine saw, and what the
host kept afterwards.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import cgroup_dirs, cordon_processes, need, wait_for


def test_exit_status_and_stdout(containerd, rootfs):
    r = containerd.run(rootfs, "sh", "-c", "echo hello from cordon; exit 3")
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == "hello from cordon"
    assert not containerd.state_dir(r.name).exists()


def test_signal_status_is_128_plus(containerd, rootfs):
    r = containerd.run(rootfs, "sh", "-c", "kill -TERM $$")
    assert r.returncode == 128 + signal.SIGTERM, r.stderr


def test_cordon_confinement_is_visible_inside(containerd, rootfs):
    r = containerd.run(rootfs, "sh", "-c",
                       "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status;"
                       " cat /proc/self/uid_map; cat /proc/1/comm")
    assert r.returncode == 0, r.stderr
    status = dict(line.split(":\t") for line in r.stdout.splitlines() if ":\t" in line)
    assert status["NoNewPrivs"] == "1"
    assert status["Seccomp"] == "2"  # a filter: cordon's allowlist
    assert int(status["CapEff"], 16) == 0  # the spec's capabilities were not granted
    uid_map = r.stdout.splitlines()[3].split()
    assert uid_map[0] == "0" and uid_map[1] != "0", "container root is not host root"
    assert r.stdout.splitlines()[-1] == "cordon-init"


def test_bundle_root_shown_host_hidden(containerd, rootfs, tmp_path):
    host_secret = tmp_path / "host-secret"
    host_secret.write_text("the host's\n")
    r = containerd.run(rootfs, "sh", "-c",
                       f"cat /etc/bundle-marker; ls /; test -e {host_secret} && echo LEAK;"
                       " cat /etc/hostname 2>/dev/null; ls /proc/1/root/ >/dev/null 2>&1"
                       " && echo proc-root-readable; mount | grep -c ' / ' ")
    assert r.returncode == 0, r.stderr
    assert "inside the bundle" in r.stdout
    assert "LEAK" not in r.stdout
    names = set(r.stdout.split())
    assert {"bin", "etc", "proc", "dev"} <= names
    assert "workspace" not in names  # cordon's own root is not what runs here


def test_root_readonly_is_honoured(containerd, rootfs):
    r = containerd.run(rootfs, "sh", "-c", "touch /etc/x 2>&1; echo rc=$?",
                       opts=("--read-only",))
    assert "rc=1" in r.stdout and "Read-only" in r.stdout, r.stdout + r.stderr
    assert not (rootfs / "etc" / "x").exists()


def test_kill_all_ends_every_process(containerd, rootfs):
    r = containerd.run(rootfs, "sh", "-c", "sleep 1000 & sleep 1000 & wait", detach=True,
                       check=True)
    name = r.name
    try:
        assert wait_for(lambda: len(containerd.ctr("task", "ps", name).stdout.splitlines()) >= 4)
        containerd.ctr("task", "kill", "-a", "-s", "9", name)
        assert wait_for(lambda: "STOPPED" in containerd.ctr("task", "ls").stdout)
        ls = containerd.ctr("task", "ls").stdout
        assert re.search(rf"{name}\s+\d+\s+STOPPED", ls), ls
    finally:
        containerd.remove(name)
    assert not containerd.state_dir(name).exists()
    assert not cgroup_dirs(f"/default/{name}") and not cgroup_dirs(f"/{containerd.namespace}/{name}")


def test_exec_without_and_with_tty(containerd, rootfs):
    r = containerd.run(rootfs, "sleep", "1000", detach=True, check=True)
    name = r.name
    try:
        e = containerd.ctr("task", "exec", "--exec-id", "e1", name, "sh", "-c",
                           "echo in-exec; grep NoNewPrivs /proc/self/status; exit 4", check=False)
        assert e.returncode == 4, e.stderr
        assert "in-exec" in e.stdout and "NoNewPrivs:\t1" in e.stdout
        # ctr wants a terminal of its own for --tty: script(1) gives it one.
        cmd = (f"ctr -a {containerd.sock} -n {containerd.namespace} task exec --tty "
               f"--exec-id e2 {name} sh -c 'tty; exit 5'")
        t = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True,
                           text=True, timeout=120, env=containerd.env, stdin=subprocess.DEVNULL)
        assert t.returncode == 5, t.stdout + t.stderr
        assert "/dev/pts/" in t.stdout
        events = [e for e in containerd_policies_events(containerd) if e.get("type") == "oci.exec"]
        assert any(e.get("container") == name for e in events)
    finally:
        containerd.remove(name)


def containerd_policies_events(containerd):
    audit = pathlib.Path(containerd.env["CORDON_OCI_DIR"]).parent / "audit" / "oci-audit.jsonl"
    return [json.loads(x) for x in audit.read_text().splitlines() if x] if audit.exists() else []


def test_run_with_tty(containerd, rootfs):
    name = "t-" + uuid.uuid4().hex[:8]
    cmd = (f"ctr -a {containerd.sock} -n {containerd.namespace} run --rm --tty --runc-binary "
           f"{containerd.runtime} --runc-root {containerd.runc_root} --rootfs {rootfs} {name} "
           "sh -c 'tty; exit 6'")
    t = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                       timeout=120, env=containerd.env, stdin=subprocess.DEVNULL)
    assert t.returncode == 6, t.stdout + t.stderr
    assert "/dev/pts/0" in t.stdout


def test_oom_is_seen_by_the_shim(containerd, rootfs):
    # The shim watches the init's memory cgroup: its OOM event is containerd's /tasks/oom.
    events = subprocess.Popen(["ctr", "-a", str(containerd.sock), "events"],
                              stdout=subprocess.PIPE, text=True, env=containerd.env)
    try:
        # tail keeps every byte of a line it has not finished: /dev/zero has no end of line.
        r = containerd.run(rootfs, "sh", "-c", "tail /dev/zero",
                           opts=("--memory-limit", str(32 << 20)))
    finally:
        events.terminate()
        seen = events.communicate(timeout=30)[0]
    assert r.returncode == 137, r.stdout + r.stderr
    assert any("/tasks/oom" in line and r.name in line for line in seen.splitlines()), seen
    ends = [e for e in containerd_policies_events(containerd)
            if e.get("type") == "run.end" and e.get("container") == r.name]
    assert ends and ends[-1]["reason"] == "oom", ends


def test_nothing_left_after_delete_force(containerd, rootfs, runtime):
    r = containerd.run(rootfs, "sleep", "1000", detach=True, check=True)
    name = r.name
    state = containerd.state_dir(name)
    init = json.loads((state / "state.json").read_text())
    keeper = init["keeper"]
    cg = init["cgroup"]
    subprocess.run([str(runtime), "--root", str(containerd.runc_root / containerd.namespace),
                    "delete", "--force", name], check=True, timeout=60)
    assert not state.exists()
    assert wait_for(lambda: not os.path.exists(f"/proc/{keeper}") or
                    "Z" in pathlib.Path(f"/proc/{keeper}/stat").read_text().split(")")[1][:3])
    assert not cgroup_dirs(cg)
    # And again: delete --force of what is gone is no error.
    again = subprocess.run([str(runtime), "--root", str(containerd.runc_root / containerd.namespace),
                            "delete", "--force", name], timeout=60)
    assert again.returncode == 0
    containerd.remove(name)


def shim_of(name):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and name.encode() in b" ".join(cmd):
            return int(pid)
    # The shim is shared per namespace and named by its first container's id.
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim-runc-v2" in cmd.split(b"\0")[0]:
                return int(pid)
    return None


def test_nothing_left_after_the_shim_is_killed(containerd, rootfs):
    r = containerd.run(rootfs, "sleep", "1000", detach=True, check=True)
    name = r.name
    state = containerd.state_dir(name)
    doc = json.loads((state / "state.json").read_text())
    shim = shim_of(name)
    assert shim, "no shim found"
    os.kill(shim, signal.SIGKILL)
    # containerd sees its shim die and cleans up through `delete --force`.
    assert wait_for(lambda: not state.exists(), 90), "state left behind"
    for pid in (doc["pid"], doc["keeper"]):
        assert wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
                        ") Z" in pathlib.Path(f"/proc/{pid}/stat").read_text(), 60)
    assert not cgroup_dirs(doc["cgroup"])
    containerd.remove(name)


def test_refusal_is_one_line_and_leaves_nothing(containerd, rootfs):
    r = containerd.run(rootfs, "true", opts=("--annotation", "run.cordon.level=sideways"))
    assert r.returncode != 0
    assert "run.cordon.level" in r.stderr, r.stderr
    assert not containerd.state_dir(r.name).exists()
    containerd.remove(r.name)


def test_annotation_cannot_weaken_the_level(containerd, rootfs):
    r = containerd.run(rootfs, "true", opts=("--annotation", "run.cordon.level=process"))
    assert r.returncode != 0
    assert "weaker" in r.stderr, r.stderr
    containerd.remove(r.name)


def test_policy_name_cannot_escape_the_admin_directory(containerd, rootfs):
    r = containerd.run(rootfs, "true", opts=("--annotation", "run.cordon.policy=../oci.yaml"))
    assert r.returncode != 0
    assert "not a policy name" in r.stderr, r.stderr
    containerd.remove(r.name)


def test_python_workload(containerd, python_rootfs):
    need(os.path.exists("/usr/bin/python3"), "no python3 on this host")
    r = containerd.run(python_rootfs, "/usr/bin/python3", "-c",
                       "import os, sys; print('py', sys.version_info[0], os.getuid());"
                       "print(open('/proc/self/status').read().count('NoNewPrivs:\\t1'))",
                       opts=("--mount", "type=bind,src=/usr,dst=/usr,options=rbind:ro"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["py", "3", "0", "1"]


PROCESS = ("--annotation", "run.cordon.policy=process.yaml")


def test_process_level(containerd, rootfs, policies):
    """The process level: no user namespace (the spec's namespaces made with the engine's
    privilege), the container's root an unprivileged host uid, Landlock and the allowlist."""
    r = containerd.run(rootfs, "sh", "-c",
                       "id -u; cat /proc/self/uid_map;"
                       " grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status;"
                       " echo x > /tmp/by-root; stat -c %u /tmp/by-root;"
                       + "printf 'GET http://169.254.169.254/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'"
                       " | nc 127.0.0.1 3128 | head -1", opts=PROCESS)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert int(lines[0]) >= 0x70000000, "the container's root must not be the host's"
    assert lines[1].split() == ["0", "0", "4294967295"], "no user namespace at this level"
    assert "NoNewPrivs:\t1" in r.stdout and "Seccomp:\t2" in r.stdout
    assert "CapEff:\t0000000000000000" in r.stdout
    # The root is idmapped to the container's range: its root owns the root filesystem,
    # whose files stay the host's root's on disk.
    assert lines[-2] == lines[0]
    assert (rootfs / "tmp" / "by-root").stat().st_uid == 0
    (rootfs / "tmp" / "by-root").unlink()
    assert "403" in r.stdout
    starts = [e for e in policies.events("run.start") if e.get("container") == r.name]
    assert starts and starts[0]["level"] == "process"


def test_process_level_exec(containerd, rootfs):
    r = containerd.run(rootfs, "sleep", "1000", detach=True, check=True, opts=PROCESS)
    try:
        e = containerd.ctr("task", "exec", "--exec-id", "p1", r.name, "sh", "-c",
                           "id -u; grep NoNewPrivs /proc/self/status", check=False)
        assert e.returncode == 0, e.stderr
        assert int(e.stdout.split()[0]) >= 0x70000000
        assert "NoNewPrivs:\t1" in e.stdout
    finally:
        containerd.remove(r.name)


def test_gvisor_level_delegates_to_runsc(containerd, rootfs):
    need(shutil.which("runsc"), "runsc is not installed")
    r = containerd.run(rootfs, "/bin/sh", "-c", "echo in-gvisor; dmesg | head -1; exit 3",
                       opts=("--annotation", "run.cordon.policy=gvisor.yaml"))
    assert r.returncode == 3, r.stderr
    assert "in-gvisor" in r.stdout
    assert "gVisor" in r.stdout or "Starting gVisor" in r.stdout, r.stdout
    assert not containerd.state_dir(r.name).exists()


def test_gvisor_level_refuses_a_gateway_it_cannot_have(containerd, rootfs):
    need(shutil.which("runsc"), "runsc is not installed")
    r = containerd.run(rootfs, "true", opts=("--annotation",
                                             "run.cordon.policy=gvisor-egress.yaml"))
    assert r.returncode != 0
    assert "gateway" in r.stderr, r.stderr
    assert not containerd.state_dir(r.name).exists()
    containerd.remove(r.name)


def test_microvm_level_is_refused_with_its_reason(containerd, rootfs):
    r = containerd.run(rootfs, "true", opts=("--annotation", "run.cordon.policy=microvm.yaml"))
    assert r.returncode != 0
    assert "microvm" in r.stderr and "guest" in r.stderr, r.stderr
    assert not containerd.state_dir(r.name).exists()
    containerd.remove(r.name)
