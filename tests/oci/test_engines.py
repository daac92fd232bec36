"""
cordon-oci under Docker (dockerd --add-runtime cordon=...) and Podman
(--runtime), each compared with runc on the same image: a tar of the test's
busybox root imported, never pulled. Each engine runs privately (its own
data root, state and socket in a temporary directory) and without a network
of its own (no iptables, no bridge): these runs use --network none.

The engines' runc on this machine cannot raise RLIMIT_NOFILE and RLIMIT_NPROC
past the hard limits the session has (no CAP_SYS_RESOURCE), so runc's runs
ask for lower ones; cordon-oci clamps a spec's limits to what it may set.
"""

import json
import os
import pathlib
import shutil
import subprocess
import tarfile
import time
import uuid

import pytest

from conftest import cordon_processes, need, wait_for

RUNC_LIMITS = ("--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")


def image_tar(root, dest):
    with tarfile.open(dest, "w") as t:
        for entry in sorted(os.listdir(root)):
            t.add(os.path.join(root, entry), arcname=entry)
    return dest


class Engine:
    """A docker or podman command line against the private daemon or store."""

    def __init__(self, argv, env, runtime_args):
        self.argv = argv
        self.env = env
        self.runtime_args = runtime_args  # per runtime: what selects it

    def __call__(self, *args, check=False, timeout=180):
        r = subprocess.run([*self.argv, *args], capture_output=True, text=True, env=self.env,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def run(self, runtime, image, *cmd, opts=()):
        extra = RUNC_LIMITS if runtime == "runc" else ()
        return self("run", "--rm", "--network", "none", *self.runtime_args[runtime], *extra,
                    *opts, image, *cmd)


@pytest.fixture(scope="module")
def docker(workdir, runtime, policies, rootfs, python_rootfs):
    need(shutil.which("dockerd") and os.path.exists("/usr/bin/docker"),
         "docker.io is not installed")
    need(os.geteuid() == 0, "dockerd runs as root")
    base = workdir / "docker"
    base.mkdir()
    env = dict(os.environ, CORDON_OCI_DIR=str(policies.path))
    log = open(base / "dockerd.log", "w")
    # daemon.json as examples/k8s/ has it, and a second entry whose runtimeArgs name the
    # process level's policy (docker run has no --annotation to do it per container).
    config = base / "daemon.json"
    config.write_text(json.dumps({"runtimes": {
        "cordon": {"path": str(runtime)},
        "cordon-process": {"path": str(runtime), "runtimeArgs": ["--policy", "process.yaml"]},
    }}))
    proc = subprocess.Popen(
        ["dockerd", "--config-file", str(config), "--data-root", str(base / "data"),
         "--exec-root", str(base / "exec"), "-H", f"unix://{base}/docker.sock",
         "--pidfile", str(base / "docker.pid"), "--iptables=false", "--ip6tables=false",
         "--bridge=none"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    d = Engine(["/usr/bin/docker", "-H", f"unix://{base}/docker.sock"], env,
               {"runc": ("--runtime", "runc"), "cordon": ("--runtime", "cordon"),
                "cordon-process": ("--runtime", "cordon-process")})
    try:
        up = wait_for(lambda: d("info").returncode == 0, 90, 0.5)
        assert up, (base / "dockerd.log").read_text()[-3000:]
        d("import", str(image_tar(rootfs, base / "bb.tar")), "cordon-bb:test", check=True)
        d("import", str(image_tar(python_rootfs, base / "py.tar")), "cordon-py:test", check=True)
        yield d
    finally:
        for c in d("ps", "-aq").stdout.split():
            d("rm", "-f", c)
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        subprocess.run(["umount", "-R", str(base / "data")], capture_output=True)
        subprocess.run(["umount", "-R", str(base / "exec")], capture_output=True)


@pytest.fixture(scope="module")
def podman(workdir, runtime, policies, rootfs, python_rootfs):
    need(shutil.which("podman"), "podman is not installed")
    need(os.geteuid() == 0, "these podman runs are root's")
    base = workdir / "podman"
    base.mkdir()
    env = dict(os.environ, CORDON_OCI_DIR=str(policies.path))
    # Podman hands its runtime a clean environment: the test's policy directory (not
    # /etc/cordon, which the test leaves alone) goes through a wrapper.
    wrapper = base / "cordon-oci"
    wrapper.write_text(f"#!/bin/sh\nCORDON_OCI_DIR={policies.path} exec {runtime} \"$@\"\n")
    wrapper.chmod(0o755)
    runtime = wrapper
    p = Engine(["podman", "--root", str(base / "root"), "--runroot", str(base / "run"),
                "--cgroup-manager", "cgroupfs", "--events-backend", "file",
                "--storage-driver", "overlay"], env,
               {"runc": ("--runtime", "runc"), "cordon": ("--runtime", str(runtime)),
                "cordon-process": ("--runtime", str(runtime), "--annotation",
                                   "run.cordon.policy=process.yaml")})
    try:
        p("import", str(image_tar(rootfs, base / "bb.tar")), "localhost/cordon-bb:test",
          check=True)
        p("import", str(image_tar(python_rootfs, base / "py.tar")), "localhost/cordon-py:test",
          check=True)
        yield p
    finally:
        p("rm", "-af")
        subprocess.run([*p.argv, "system", "reset", "-f"], capture_output=True, env=env)
        subprocess.run(["umount", "-R", str(base / "root")], capture_output=True)


ENGINES = ["docker", "podman"]
RUNTIMES = ["runc", "cordon", "cordon-process"]


def engine_and_image(request, name, kind="bb"):
    e = request.getfixturevalue(name)
    return e, (f"cordon-{kind}:test" if name == "docker" else f"localhost/cordon-{kind}:test")


@pytest.mark.parametrize("runtime_name", RUNTIMES)
@pytest.mark.parametrize("engine", ENGINES)
def test_exit_status_and_output(request, engine, runtime_name):
    e, image = engine_and_image(request, engine)
    r = e.run(runtime_name, image, "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7, r.stderr
    assert r.stdout.strip() == "out"
    assert "err" in r.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_confinement_only_under_cordon(request, engine):
    e, image = engine_and_image(request, engine)
    seen = {}
    for rt in RUNTIMES:
        r = e.run(rt, image, "sh", "-c", "grep NoNewPrivs /proc/self/status; cat /proc/1/comm;"
                  " id -u; grep -c . /proc/self/uid_map")
        assert r.returncode == 0, r.stderr
        seen[rt] = r.stdout.split()
    assert seen["cordon"] == ["NoNewPrivs:", "1", "cordon-init", "0", "1"]
    # The process level: no user namespace; the container's root is an unprivileged host uid.
    assert seen["cordon-process"][:3] == ["NoNewPrivs:", "1", "cordon-init"]
    assert int(seen["cordon-process"][3]) >= 0x70000000
    assert seen["runc"][:2] == ["NoNewPrivs:", "0"]


@pytest.mark.parametrize("runtime_name", RUNTIMES)
@pytest.mark.parametrize("engine", ENGINES)
def test_exec_and_kill(request, engine, runtime_name):
    e, image = engine_and_image(request, engine)
    name = f"x-{runtime_name}-{uuid.uuid4().hex[:6]}"
    extra = RUNC_LIMITS if runtime_name == "runc" else ()
    e("run", "-d", "--name", name, "--network", "none", *e.runtime_args[runtime_name], *extra,
      image, "sleep", "1000", check=True)
    cid = e("inspect", "-f", "{{.Id}}", name, check=True).stdout.strip()
    init = int(e("inspect", "-f", "{{.State.Pid}}", name, check=True).stdout.strip())
    keepers = [p for p in cordon_processes(cid)]
    try:
        x = e("exec", name, "sh", "-c", "echo in-exec; exit 4")
        assert x.returncode == 4, x.stderr
        assert x.stdout.strip() == "in-exec"
        e("kill", "-s", "KILL", name, check=True)
        code = e("wait", name).stdout.strip()
        assert code == "137"
    finally:
        e("rm", "-f", name)
    if runtime_name != "runc":
        assert keepers, "no keeper found for the container"
        assert wait_for(lambda: all(gone(p) for p in [init, *keepers]), 60)


def gone(pid):
    try:
        return ") Z" in pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True


@pytest.mark.parametrize("runtime_name", RUNTIMES)
@pytest.mark.parametrize("engine", ENGINES)
def test_python_workload(request, engine, runtime_name):
    need(os.path.exists("/usr/bin/python3"), "no python3 here")
    e, image = engine_and_image(request, engine, "py")
    r = e.run(runtime_name, image, "/usr/bin/python3", "-c",
              "import json, sys; print(json.dumps({'v': sys.version_info[0]}))",
              opts=("-v", "/usr:/usr:ro"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == '{"v": 3}'


@pytest.fixture(scope="module")
def rootless_podman(workdir, runtime, rootfs):
    """Podman as an ordinary user (uid 65534): its runtime runs as root of a user namespace
    Podman made, with the one id it maps; the policy directory is that user's own."""
    need(shutil.which("podman") and shutil.which("setpriv"), "podman or setpriv missing")
    need(os.geteuid() == 0, "making the ordinary user's home takes root")
    home = workdir / "rootless"
    for d in ("", "run", "etc", "etc/oci", "audit"):
        (home / d).mkdir(exist_ok=True)
        os.chown(home / d, 65534, 65534)
    os.chmod(home / "run", 0o700)
    (home / "etc" / "oci.yaml").write_text(f"version: 1\naudit:\n  file: {home}/audit/a.jsonl\n")
    os.chown(home / "etc" / "oci.yaml", 65534, 65534)
    tar = image_tar(rootfs, home / "bb.tar")
    os.chown(tar, 65534, 65534)
    wrapper = home / "cordon-oci"
    wrapper.write_text(f"#!/bin/sh\nCORDON_OCI_DIR={home}/etc exec {runtime} \"$@\"\n")
    wrapper.chmod(0o755)
    env = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR=str(home / "run"))
    p = Engine(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "podman",
                "--root", str(home / "root"), "--runroot", str(home / "runroot"),
                "--cgroup-manager", "cgroupfs", "--events-backend", "file"], env,
               {"cordon": ("--runtime", str(wrapper))})
    p("import", str(tar), "localhost/cordon-bb:test", check=True)
    try:
        yield p, home
    finally:
        p("rm", "-af")
        subprocess.run([*p.argv, "system", "reset", "-f"], capture_output=True, env=env)


def test_rootless_podman(rootless_podman):
    p, home = rootless_podman
    r = p.run("cordon", "localhost/cordon-bb:test", "sh", "-c",
              "echo rootless; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; exit 5")
    assert r.returncode == 5, r.stderr
    assert r.stdout.split() == ["rootless", "NoNewPrivs:", "1", "Seccomp:", "2"]
    audit = (home / "audit" / "a.jsonl").read_text()
    assert '"type":"run.end"' in audit
