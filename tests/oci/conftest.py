"""
Fixtures for cordon-oci under real engines: a private containerd started and
stopped by the session (its root, state and sockets in a temporary
directory), a busybox-static root filesystem built here, the policy
directory cordon-oci reads (CORDON_OCI_DIR), and the checks for what a
container may leave behind.

Everything is offline: the images are directories and tars made by the
tests, never pulled. The build directory is $CORDON_BUILD, or ../../build.
"""

import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CORDON_BUILD", REPO / "build")).resolve()
BUSYBOX = "/bin/busybox"
STRICT = os.environ.get("CORDON_TESTS_STRICT") == "1"


def need(cond, why):
    """Skip with WHY unless COND; in CI (strict) a missing piece fails instead."""
    if cond:
        return
    if STRICT:
        pytest.fail(why)
    pytest.skip(why)


def wait_for(check, timeout=60.0, step=0.05):
    """Poll CHECK until it returns a true value; generous, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(step)


@pytest.fixture(scope="session")
def workdir():
    d = pathlib.Path(tempfile.mkdtemp(prefix="cordon-oci-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def runtime(workdir):
    """cordon-oci: the cordon binary under the name engines call."""
    need((BUILD / "cordon").exists(), f"no cordon in {BUILD}")
    bindir = workdir / "bin"
    bindir.mkdir()
    shutil.copy2(BUILD / "cordon", bindir / "cordon")
    os.symlink("cordon", bindir / "cordon-oci")
    return bindir / "cordon-oci"


def make_rootfs(path, extra_dirs=()):
    """A busybox-static root: /bin with the applets, the usual empty directories."""
    need(os.path.exists(BUSYBOX), "busybox-static is not installed")
    path = pathlib.Path(path)
    for d in ("bin", "dev", "proc", "sys", "etc", "tmp", "root", "run", *extra_dirs):
        (path / d).mkdir(parents=True, exist_ok=True)
    os.chmod(path / "tmp", 0o1777)
    shutil.copy2(BUSYBOX, path / "bin" / "busybox")
    for applet in subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True,
                                 check=True).stdout.split():
        link = path / "bin" / applet
        if not link.exists():
            os.symlink("busybox", link)
    (path / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                         "nobody:x:65534:65534:nobody:/:/bin/sh\n")
    (path / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (path / "etc" / "bundle-marker").write_text("inside the bundle\n")
    return path


@pytest.fixture(scope="session")
def rootfs(workdir):
    return make_rootfs(workdir / "rootfs")


@pytest.fixture(scope="session")
def python_rootfs(workdir):
    """busybox plus the host's /usr bound read-only: python3 with its whole library."""
    root = make_rootfs(workdir / "pyroot", extra_dirs=("usr",))
    for link in ("lib", "lib64"):
        if os.path.islink(f"/{link}"):
            os.symlink(os.readlink(f"/{link}"), root / link)
    return root


@dataclasses.dataclass
class PolicyDir:
    path: pathlib.Path
    audit: pathlib.Path

    def write(self, name, text):
        p = self.path / "oci" / name
        p.write_text(text)
        os.chmod(p, 0o644)
        return p

    def events(self, kind=None):
        if not self.audit.exists():
            return []
        out = [json.loads(line) for line in self.audit.read_text().splitlines() if line]
        return [e for e in out if kind is None or e.get("type") == kind]


@pytest.fixture(scope="session")
def policies(workdir):
    """CORDON_OCI_DIR: oci.yaml (the default policy) and oci/NAME, admin-owned."""
    d = workdir / "etc-cordon"
    (d / "oci").mkdir(parents=True)
    os.chmod(d, 0o755)
    os.chmod(d / "oci", 0o755)
    audit = workdir / "audit" / "oci-audit.jsonl"
    audit.parent.mkdir()
    (d / "oci.yaml").write_text(f"version: 1\naudit:\n  file: {audit}\n")
    pd = PolicyDir(d, audit)
    pd.write("egress.yaml", f"version: 1\naudit:\n  file: {audit}\n"
             "network:\n  allow: [example.test]\n")
    pd.write("small.yaml", f"version: 1\naudit:\n  file: {audit}\nlimits:\n  memory: 48M\n")
    pd.write("gvisor.yaml", f"version: 1\nisolation: gvisor\naudit:\n  file: {audit}\n")
    pd.write("microvm.yaml", f"version: 1\nisolation: microvm\naudit:\n  file: {audit}\n")
    pd.write("gvisor-egress.yaml", f"version: 1\nisolation: gvisor\naudit:\n  file: {audit}\n"
             "network:\n  allow: [example.test]\n")
    pd.write("process.yaml", f"version: 1\nisolation: process\naudit:\n  file: {audit}\n"
             "network:\n  allow: [example.test]\n")
    return pd


class Containerd:
    def __init__(self, base, env, runtime):
        self.base = base
        self.sock = base / "containerd.sock"
        self.env = env
        self.runtime = runtime
        self.runc_root = base / "runc-root"
        self.namespace = "cordon-test"
        self.proc = None

    def start(self):
        cfg = self.base / "config.toml"
        cfg.write_text(f"""version = 2
root = "{self.base}/root"
state = "{self.base}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.base}/containerd.ttrpc.sock"
""")
        self.log = open(self.base / "containerd.log", "w")
        self.proc = subprocess.Popen(["containerd", "--config", str(cfg)], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        ok = wait_for(lambda: self.ctr("version", check=False).returncode == 0, 60)
        assert ok, (self.base / "containerd.log").read_text()[-2000:]

    def stop(self):
        if self.proc:
            for c in self.ctr("containers", "ls", "-q", check=False).stdout.split():
                self.ctr("task", "kill", "-s", "9", c, check=False)
                self.ctr("task", "rm", "-f", c, check=False)
                self.ctr("containers", "rm", c, check=False)
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.log.close()

    def ctr(self, *args, check=True, timeout=120, input=None):
        r = subprocess.run(["ctr", "-a", str(self.sock), "-n", self.namespace, *args],
                           capture_output=True, text=True, timeout=timeout, env=self.env,
                           input=input)
        if check and r.returncode != 0:
            raise AssertionError(f"ctr {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def run(self, root, *cmd, name=None, opts=(), detach=False, check=False, timeout=120):
        """ctr run with cordon-oci over ROOT; the CompletedProcess."""
        name = name or "c-" + uuid.uuid4().hex[:10]
        args = ["run", "--runc-binary", str(self.runtime), "--runc-root", str(self.runc_root),
                "--rootfs", *opts]
        args += ["-d"] if detach else ["--rm"]
        r = self.ctr(*args, str(root), name, *cmd, check=check, timeout=timeout)
        r.name = name
        return r

    def state_dir(self, name):
        return self.runc_root / self.namespace / name

    def remove(self, name):
        self.ctr("task", "kill", "-s", "9", name, check=False)
        wait_for(lambda: "STOPPED" in self.ctr("task", "ls", check=False).stdout
                 or name not in self.ctr("task", "ls", check=False).stdout, 30)
        self.ctr("task", "rm", "-f", name, check=False)
        self.ctr("containers", "rm", name, check=False)


@pytest.fixture(scope="session")
def containerd(workdir, runtime, policies):
    need(shutil.which("containerd") and shutil.which("ctr"), "containerd is not installed")
    need(os.geteuid() == 0, "containerd's tests run as root")
    base = workdir / "containerd"
    base.mkdir()
    env = dict(os.environ, CORDON_OCI_DIR=str(policies.path))
    c = Containerd(base, env, runtime)
    c.start()
    yield c
    c.stop()


def cordon_processes(marker=None):
    """Pids of processes that are a cordon-oci container's init or keeper."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker is None and comm == "cordon-init":
            out.append(int(pid))
        elif b"cordon-oci" in cmd and (marker is None or marker.encode() in cmd):
            out.append(int(pid))
    return out


def cgroup_dirs(path):
    """Where PATH (a cgroupsPath) would be, in each hierarchy mounted here."""
    out = []
    for d in pathlib.Path("/sys/fs/cgroup").iterdir():
        p = d / path.lstrip("/")
        if p.exists():
            out.append(p)
    root = pathlib.Path("/sys/fs/cgroup") / path.lstrip("/")
    if root.exists() and root not in out:
        out.append(root)
    return out
