"""
The filesystem surface: a built root with nothing of the host's but what is
bound. Each test tries to reach a host file or write where it may not, and
checks both the probe's errno and the host side.
"""

import errno
import os
import secrets
import stat
import subprocess

import pytest

import levels

from conftest import assert_errno

GONE = (errno.ENOENT,)
# A path that exists inside but belongs to someone else may also say EACCES;
# both are refusals, neither leaks.
GONE_OR_DENIED = (errno.ENOENT, errno.EACCES, errno.EPERM)
READ_ONLY = (errno.EROFS, errno.EACCES)


@pytest.fixture
def root_secret():
    """A secret only host root can read: /root/<name>."""
    if os.geteuid() != 0:
        pytest.skip("needs root to plant a file in /root")
    path = f"/root/cordon-it-secret-{secrets.token_hex(4)}"
    value = "root-secret-" + secrets.token_hex(8)
    with open(path, "w") as f:
        f.write(value + "\n")
    os.chmod(path, 0o600)
    yield path, value
    os.unlink(path)


@pytest.fixture
def home_secret():
    """A world-readable file under /home: only the sandbox's root hides it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to plant a file in /home")
    d = f"/home/cordon-it-{secrets.token_hex(4)}"
    os.mkdir(d, 0o755)
    value = "home-secret-" + secrets.token_hex(8)
    with open(f"{d}/notes.txt", "w") as f:
        f.write(value + "\n")
    os.chmod(f"{d}/notes.txt", 0o644)
    yield f"{d}/notes.txt", value
    os.unlink(f"{d}/notes.txt")
    os.rmdir(d)


def test_private_file_unreadable_by_path(cordon, host_secret):
    path, value = host_secret
    r = cordon.probe("read", path)
    assert_errno(r, *GONE)
    assert value not in r.out


def test_root_home_unreadable(cordon, root_secret):
    path, value = root_secret
    r = cordon.probe("read", path)
    assert_errno(r, *GONE_OR_DENIED)
    assert value not in r.out


def test_world_readable_home_file_invisible(cordon, home_secret):
    path, value = home_secret
    r = cordon.probe("read", path)
    assert_errno(r, *GONE)
    assert value not in r.out


def test_secret_unreachable_via_proc_1_root(cordon, host_secret):
    path, value = host_secret
    for via in (f"/proc/1/root{path}", f"/proc/self/root{path}",
                f"/proc/1/cwd/../../..{path}"):
        r = cordon.probe("read", via)
        assert_errno(r, *GONE_OR_DENIED)
        assert value not in r.out


def test_secret_unreachable_via_planted_symlinks(cordon, host_secret):
    path, value = host_secret
    path = str(path)
    ws = cordon.hostdir("ws")
    links = {
        "abs": path,
        "dotdot": "../" * 12 + path.lstrip("/"),
        "dir": os.path.dirname(path),
        "parent": "..",
    }
    for name, target in links.items():
        os.symlink(target, ws / name)
        os.lchown(ws / name, cordon.ident.uid, cordon.ident.gid)
    base = os.path.basename(path)
    for via in ("/workspace/abs", "/workspace/dotdot", f"/workspace/dir/{base}",
                f"/workspace/parent/{os.path.relpath(path, ws.parent)}"):
        r = cordon.probe("read", via, opts=["-w", ws])
        assert_errno(r, *GONE)
        assert value not in r.out


def test_symlink_to_host_workspace_path_stays_inside(cordon, host_secret):
    """The workspace's own host path means nothing inside."""
    path, value = host_secret
    ws = cordon.hostdir("ws")
    (ws / "inside.txt").write_text("in the workspace\n")
    r = cordon.probe("read", str(ws / "inside.txt"), opts=["-w", ws])
    assert_errno(r, *GONE)


@pytest.mark.parametrize("path", ["/home", "/root", "/run", "/var", "/sys", "/boot",
                                  "/srv", "/mnt", "/work"])
def test_host_tree_invisible(cordon, path):
    """Absent, or an empty directory of the sandbox's own."""
    host = set(os.listdir(path)) if os.path.isdir(path) else set()
    r = cordon.probe("ls", path)
    if r.status == 0:
        leaked = set(r.out.split()) & host
        assert not leaked, f"host entries of {path} visible: {sorted(leaked)}\n{r}"
    else:
        assert_errno(r, *GONE)


def test_root_is_not_the_hosts(cordon):
    r = cordon.probe("ls", "/")
    assert r.status == 0, r
    seen = set(r.out.split())
    assert {"usr", "proc", "dev", "tmp", "workspace"} <= seen, r
    leaked = seen & {"home", "root", "boot", "srv", "work", "lost+found"}
    assert not leaked, f"host top-level entries visible: {sorted(leaked)}\n{r}"


def test_host_proc_invisible(cordon):
    """/proc is the sandbox's: a handful of pids, not the host's or the supervisor's."""
    host_pids = {d for d in os.listdir("/proc") if d.isdigit()}
    r = cordon.probe("ls", "/proc")
    assert r.status == 0, r
    pids = {d for d in r.out.split() if d.isdigit()}
    assert pids, r
    assert len(pids) < 10, f"too many processes visible: {sorted(pids)}\n{r}"
    assert str(os.getpid()) not in pids or os.getpid() < 10
    # pid 1 inside is the sandbox's init, not the host's.
    with open("/proc/1/cmdline", "rb") as f:
        host_init = f.read()
    r = cordon.probe("read", "/proc/1/cmdline")
    if r.status == 0:
        assert r.stdout != host_init, r
    else:
        assert_errno(r, *GONE_OR_DENIED)
    assert len(host_pids) > len(pids)


def test_proc_sys_not_writable(cordon):
    r = cordon.probe("write", "/proc/sys/kernel/hostname", "pwned\n")
    assert r.status != 0, r
    assert r.status < 128, r
    assert open("/proc/sys/kernel/hostname").read().strip() != "pwned"


def test_usr_not_writable(cordon):
    name = f"cordon-it-{secrets.token_hex(4)}"
    r = cordon.probe("write", f"/usr/bin/{name}")
    assert_errno(r, *READ_ONLY)
    assert not os.path.exists(f"/usr/bin/{name}")
    r = cordon.probe("write", "/usr/bin/env")
    assert_errno(r, *READ_ONLY)
    r = cordon.probe("write", "/etc/passwd")
    assert_errno(r, *READ_ONLY)


def test_ro_bind_not_writable(cordon):
    d = cordon.hostdir("ro")
    (d / "data.txt").write_text("original\n")
    os.chown(d / "data.txt", cordon.ident.uid, cordon.ident.gid)
    r = cordon.probe("read", "/data/data.txt", opts=["--ro", f"{d}:/data"])
    assert r.status == 0 and r.out == "original\n", r
    r = cordon.probe("write", "/data/data.txt", opts=["--ro", f"{d}:/data"])
    assert_errno(r, *READ_ONLY)
    r = cordon.probe("write", "/data/new.txt", opts=["--ro", f"{d}:/data"])
    assert_errno(r, *READ_ONLY)
    assert (d / "data.txt").read_text() == "original\n"
    assert not (d / "new.txt").exists()


def test_ro_bind_default_dest_is_same_path(cordon):
    d = cordon.hostdir("ro")
    (d / "x").write_text("same path\n")
    r = cordon.probe("read", d / "x", opts=["--ro", d])
    assert r.status == 0 and r.out == "same path\n", r


def test_rw_bind_writable(cordon):
    d = cordon.hostdir("rw")
    r = cordon.probe("write", "/data/out.txt", "written inside\n", opts=["--rw", f"{d}:/data"])
    assert r.status == 0, r
    assert (d / "out.txt").read_text() == "written inside\n"
    assert (d / "out.txt").stat().st_uid == cordon.ident.uid


def test_workspace_files_belong_to_caller(cordon):
    ws = cordon.hostdir("ws")
    r = cordon.run(["sh", "-c", "echo hi > made.txt && mkdir sub && echo x > sub/y && pwd"],
                   "-w", ws)
    assert r.status == 0, r
    assert r.out.strip() == ("/workspace" if levels.has_mounts(cordon.level) else str(ws)), r
    for p in (ws / "made.txt", ws / "sub", ws / "sub" / "y"):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (cordon.ident.uid, cordon.ident.gid), (p, st)
    assert not (ws / "made.txt").stat().st_mode & 0o6000


def test_workspace_host_file_readable(cordon):
    ws = cordon.hostdir("ws")
    (ws / "input.txt").write_text("input\n")
    os.chown(ws / "input.txt", cordon.ident.uid, cordon.ident.gid)
    r = cordon.run(["cat", "input.txt"], "-w", ws)
    assert r.status == 0 and r.out == "input\n", r


def test_scratch_workspace_is_empty_and_writable(cordon):
    r = cordon.run(["sh", "-c", "ls -A /workspace; echo x > /workspace/f && cat /workspace/f"])
    assert r.status == 0 and r.out == "x\n", r


def test_tmp_is_private_and_capped(cordon):
    name = f"cordon-it-{secrets.token_hex(4)}"
    r = cordon.run(["sh", "-c", f"echo x > /tmp/{name} && ls -A /tmp"])
    assert r.status == 0, r
    assert sorted(r.out.split()) == sorted([name, "home"]), r  # HOME is /tmp/home
    assert not os.path.exists(f"/tmp/{name}")
    # 2 MiB into a 1 MiB /tmp: ENOSPC, not a crash.
    r = cordon.run(["sh", "-c", "head -c 2097152 /dev/zero > /tmp/big"], "--tmp-size", "1M")
    assert r.status == 1, r
    assert "space" in r.err.lower(), r


def test_sandbox_etc_has_only_what_programs_need(cordon):
    r = cordon.probe("read", "/etc/shadow")
    assert_errno(r, *GONE_OR_DENIED)
    r = cordon.run(["id", "-un"])
    assert r.status == 0 and r.out.strip() == "sandbox", r


def test_root_only_files_in_the_hosts_etc_stay_unreadable(cordon):
    """What only root may read in the /etc entries cordon shows (/etc/ssl/private's
    keys) stays unreadable at every level, also where a root caller's command owns
    root's files (the process level's uid 0, gVisor's and the guest's views); the
    rest of the entry still reads."""
    tag = f"cordon-it-{secrets.token_hex(4)}"
    secret = f"SECRET-{secrets.token_hex(8)}"
    keydir = f"/etc/ssl/{tag}"
    planted = [f"{keydir}/key", f"/etc/ssl/{tag}.key", f"/etc/terminfo/{tag}"]
    os.makedirs("/etc/terminfo", exist_ok=True)
    os.mkdir(keydir, 0o700)
    try:
        for path in planted:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, secret.encode())
            os.close(fd)
        r = cordon.run(["sh", "-c", "for f in \"$@\"; do cat \"$f\" 2>/dev/null && echo READ $f; done; "
                        "head -c 27 /etc/ssl/certs/ca-certificates.crt", "sh", *planted])
        assert r.status == 0, r
        assert secret not in r.out and "READ" not in r.out, r
        assert r.out.endswith("-----BEGIN CERTIFICATE-----"), r
        for path in planted:                        # the host's files are as they were
            with open(path) as f:
                assert f.read() == secret
    finally:
        for path in planted:
            if os.path.exists(path):
                os.unlink(path)
        os.rmdir(keydir)


def test_every_mount_nosuid_and_nodev(cordon):
    """nosuid on every mount; nodev on all but the few device binds of /dev."""
    d = cordon.hostdir("ro")
    r = cordon.run(["cat", "/proc/self/mountinfo"], "--ro", f"{d}:/data", "--rw",
                   f"{cordon.hostdir('rw')}:/out")
    assert r.status == 0, r
    devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
               "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/console"}
    seen = set()
    for line in r.out.splitlines():
        fields = line.split()
        mnt, opts = fields[4], fields[5].split(",")
        seen.add(mnt)
        assert "nosuid" in opts, line
        if mnt not in devices:
            assert "nodev" in opts, line
        if mnt in ("/usr", "/data", "/opt/probe") or mnt.startswith("/etc"):
            assert "ro" in opts, line
    assert {"/usr", "/data", "/out", "/workspace", "/tmp", "/proc"} <= seen, r


def test_ro_bind_is_recursive(root_cordon, hosttmp):
    """A mount below a read-only bind is read-only inside too (MS_REC)."""
    top = root_cordon.hostdir("top")
    sub = top / "sub"
    sub.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "cit", str(sub)]).returncode:
        pytest.fail("cannot mount a tmpfs as root")
    try:
        r = root_cordon.probe("write", "/data/sub/x", opts=["--ro", f"{top}:/data"])
        assert_errno(r, *READ_ONLY)
        assert not (sub / "x").exists()
    finally:
        subprocess.run(["umount", str(sub)], check=True)


def test_probe_bind_is_the_mechanism(cordon):
    """Sanity for every probe test above: the probe runs and can succeed."""
    r = cordon.probe("ids")
    assert r.status == 0, r
    assert "uid=1000 euid=1000" in r.out, r


def test_workspace_cannot_plant_setuid_files(cordon):
    """
    Files the sandbox writes belong to the caller on the host, so a setuid
    bit set inside would be a setuid-caller (for root: setuid-root) program
    on the host. Whatever the sandbox tries, no such file may come out.
    """
    ws = cordon.hostdir("ws")
    script = (
        "cp /bin/dash sh1; chmod 4755 sh1; chmod u+s,g+s sh1;"
        "install -m 6755 /bin/dash sh2;"
        "python3 -c \"import os, shutil;"
        " fd = os.open('sh3', os.O_CREAT | os.O_WRONLY, 0o6755);"
        " os.write(fd, open('/bin/dash', 'rb').read()); os.close(fd);"
        " os.mkdir('sgid', 0o2777); shutil.copy('/bin/dash', 'sgid/sh4');"
        " os.chmod('sgid/sh4', 0o2755)\";"
        "ls -ln; true"
    )
    r = cordon.run(["sh", "-c", script], "-w", ws)
    assert r.status == 0, r
    planted = []
    for dirpath, dirnames, filenames in os.walk(ws):
        for n in filenames:
            st = os.lstat(os.path.join(dirpath, n))
            if st.st_mode & stat.S_ISUID or (st.st_mode & stat.S_ISGID
                                             and st.st_mode & stat.S_IXGRP):
                planted.append(f"{os.path.join(dirpath, n)} mode={oct(st.st_mode)} "
                               f"uid={st.st_uid} gid={st.st_gid}")
    assert not planted, "the sandbox planted set-id programs on the host:\n" + "\n".join(
        planted) + f"\n{r}"


def test_no_device_nodes(cordon):
    ws = cordon.hostdir("ws")
    r = cordon.run(["python3", "-c",
                    "import os, stat\n"
                    "try:\n"
                    "    os.mknod('mem', stat.S_IFCHR | 0o666, os.makedev(1, 1))\n"
                    "except OSError as e:\n"
                    "    raise SystemExit(e.errno)\n"], "-w", ws)
    assert r.status in (errno.EPERM, errno.EACCES), r
    assert not (ws / "mem").exists()


def test_dev_is_minimal(cordon):
    allowed = {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm",
               "fd", "stdin", "stdout", "stderr", "console", "mqueue", "core"}
    r = cordon.probe("ls", "/dev")
    assert r.status == 0, r
    extra = set(r.out.split()) - allowed
    assert not extra, f"unexpected /dev entries: {sorted(extra)}\n{r}"
    for dev in ("/dev/sda", "/dev/vda", "/dev/mem", "/dev/kmsg", "/dev/fuse", "/dev/kvm"):
        r = cordon.probe("read", dev)
        assert_errno(r, *GONE_OR_DENIED)
