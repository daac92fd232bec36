"""
Every limit at every level, as root and as an ordinary user: a run tries to
go past it, and the limit either held (the run ended with the limit's reason,
or the allocation failed at the limit) or the run's `enforcement` says that
nothing holds it there ("none", or "memory" for an inode count whose files
cost memory the run's memory limit counts) -- never "held" when it was not.
levels.HELD_BY is the table of what holds each limit where; README's "Limits
at each level" says why.
"""

import errno
import json

import pytest

import levels

MIB = 1 << 20

# Runs inside: goes past one limit, printing one JSON line of what it got.
PROBE = r'''
import errno, json, os, sys, time
what, arg = sys.argv[1], json.loads(sys.argv[2])
# Where the level has no mounts (process), /tmp is $TMPDIR and the workspace the cwd.
HERE = {"/tmp": os.environ.get("TMPDIR") or "/tmp", "/workspace": os.getcwd()}

def out(**kw):
    print(json.dumps(kw), flush=True)

if what == "memory":
    chunks = []
    try:
        while len(chunks) < arg:                   # 16 MiB at a time, touched
            chunks.append(b"\x01" * (16 << 20))
        out(got=len(chunks) * 16, err=None)
    except MemoryError:
        out(got=len(chunks) * 16, err="ENOMEM")
elif what == "pids":
    n, err = 0, None
    try:
        while n < arg:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
    except OSError as e:
        err = errno.errorcode[e.errno]
    out(got=n, err=err)
elif what == "cpu":
    while True:
        pass
elif what == "open_files":
    fds, err = [], None
    try:
        while len(fds) < arg:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = errno.errorcode[e.errno]
    out(got=len(fds) + 3, err=err)                 # with stdin, stdout, stderr
elif what == "bytes":                              # [DIR, MiB]: one file, 1 MiB at a time
    d, n = HERE.get(arg[0], arg[0]), arg[1]
    got, err = 0, None
    try:
        with open(os.path.join(d, "fill"), "wb", buffering=0) as f:
            while got < n:
                f.write(b"\x02" * MIB)
                got += 1
    except OSError as e:
        err = errno.errorcode[e.errno]
    out(got=got, err=err)
elif what == "files":                              # [DIR, N]: empty files
    d, n = HERE.get(arg[0], arg[0]), arg[1]
    got, err = 0, None
    try:
        while got < n:
            open(os.path.join(d, "f%d" % got), "w").close()
            got += 1
    except OSError as e:
        err = errno.errorcode[e.errno]
    out(got=got, err=err)
'''.replace("MIB", str(MIB))

TREE = {"memory", "pids", "cpu"}  # explicit limits an ordinary user marks best-effort
FS = {"tmp": "/tmp", "shm": "/dev/shm", "workspace": "/workspace"}


def probe(cordon, what, arg, *opts, policy=None, timeout=120):
    d = cordon.hostdir("probe")
    (d / "limits.py").write_text(PROBE)
    (d / "limits.py").chmod(0o644)
    extra = []
    if policy:
        (d / "policy.yaml").write_text("version: 1\n" + policy)
        extra = ["-p", d / "policy.yaml"]
    return cordon.run(["python3", "/lp/limits.py", what, json.dumps(arg)],
                      "--ro", f"{d}:/lp", *extra, *opts, timeout=timeout)


def said(r):
    lines = [l for l in r.out.splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def reported(r, limit):
    return r.result["enforcement"][limit]


def assert_reported(cordon, r, limit):
    want = levels.held_by(limit, cordon.level, cordon.root)
    got = reported(r, limit)
    if want == "cgroup":
        assert got in ("cgroup-v1", "cgroup-v2"), (limit, got, r)
    else:
        assert got == want, (limit, got, r)
    return want


def best_effort(cordon, limit):
    return [] if cordon.root else ["--best-effort", limit]


def no_shm(cordon, fs, got):
    """The process level gives the run no /dev/shm of its own: the host's
    is Landlock's to refuse, so nothing is written there at all."""
    return cordon.level == "process" and fs == "shm" and got == {"got": 0, "err": "EACCES"}


def test_memory_is_held(cordon):
    """64M, and 1 GiB asked for: an OOM kill, or the allocation refused
    within the limit (an rlimit counts each process: python is one)."""
    r = probe(cordon, "memory", 64, "-m", "64M", *best_effort(cordon, "memory"))
    how = assert_reported(cordon, r, "memory")
    if (r.status, r.result["reason"]) == (137, "oom"):
        assert how in ("cgroup", "supervisor"), r
        return
    got = said(r)
    assert how == "rlimit" and got and got["err"] == "ENOMEM", r
    assert got["got"] <= 64, r


def test_a_memory_limit_too_small_to_start_still_says_what_held_it(cordon):
    """24M: enough for `true` at most levels, too little for the microvm's
    QEMU to start. A run its memory limit ends while it is being built is
    an oom whose result still says what held the limit (it once said
    "none", at wall 0: test_memory_is_held's rare microvm failure)."""
    r = cordon.run(["true"], "-m", "24M", *best_effort(cordon, "memory"))
    assert_reported(cordon, r, "memory")
    assert r.status == 0 or (r.status, r.result["reason"]) == (137, "oom"), r


def test_pids_are_held(cordon):
    """32, and 100 forks asked for: the run ends as pids_limit, or forks are
    refused (EAGAIN) before the 32nd."""
    r = probe(cordon, "pids", 100, "--pids", "32", *best_effort(cordon, "pids"))
    how = assert_reported(cordon, r, "pids")
    if r.result["reason"] == "pids_limit":
        assert how == "cgroup", r
        return
    got = said(r)
    assert how in ("rlimit", "kernel") and got and got["err"] == "EAGAIN", r
    # At the process level an ordinary caller's RLIMIT_NPROC counts all their
    # tasks: the run gets 32 on top of those they had as it started, a count
    # their other processes change meanwhile (this suite's other runs).
    shared = cordon.level == "process" and not cordon.root
    assert got["got"] < (100 if shared else 32), r


def test_cpu_is_held(cordon):
    r = probe(cordon, "cpu", 0, "--cpu", "1s", "-t", "120s", *best_effort(cordon, "cpu"),
              timeout=180)
    assert_reported(cordon, r, "cpu")
    assert r.result["reason"] == "cpu_limit", r


def test_wall_is_held(cordon):
    r = cordon.run(["sleep", "60"], "-t", "2s")
    assert_reported(cordon, r, "wall")
    assert (r.status, r.result["reason"]) == (124, "timeout"), r


def test_output_is_held(cordon):
    r = cordon.run(["head", "-c", str(3 * MIB), "/dev/zero"], "--output", "1M")
    assert_reported(cordon, r, "output")
    assert r.result["reason"] == "output_limit", r
    assert len(r.stdout) <= MIB and r.result["stdout_bytes"] <= MIB, r


def test_file_size_is_held(cordon):
    r = probe(cordon, "bytes", ["/tmp", 4], policy="limits:\n  file_size: 1M\n")
    assert_reported(cordon, r, "file_size")
    got = said(r)                                   # python ignores SIGXFSZ: EFBIG
    assert got == {"got": 1, "err": "EFBIG"}, r


def test_open_files_are_held(cordon):
    r = probe(cordon, "open_files", 1000, policy="limits:\n  open_files: 64\n")
    assert_reported(cordon, r, "open_files")
    got = said(r)
    assert got["err"] == "EMFILE" and got["got"] <= 64, r


@pytest.mark.parametrize("fs", sorted(FS))
def test_fs_size_is_held_or_said_not_to_be(cordon, fs):
    """An 8M cap, 16M written: ENOSPC within it where a tmpfs of the run's
    own holds it; where the result says "none", nothing did."""
    r = probe(cordon, "bytes", [FS[fs], 16], policy=f"filesystem:\n  {fs}_size: 8M\n")
    how = assert_reported(cordon, r, f"{fs}_size")
    got = said(r)
    if how == "tmpfs":
        assert got["err"] == "ENOSPC" and got["got"] <= 8, r
    else:
        assert how == "none" and (got == {"got": 16, "err": None} or no_shm(cordon, fs, got)), r


@pytest.mark.parametrize("fs", sorted(FS))
def test_fs_inodes_are_held_or_said_not_to_be(cordon, fs):
    """500 inodes, 2000 files made: ENOSPC within the cap where a tmpfs of
    the run's own counts them; where the result says "memory" or "none",
    nothing counted them (gVisor's tmpfs, the process level's host
    directories), and all 2000 were made."""
    r = probe(cordon, "files", [FS[fs], 2000], policy=f"filesystem:\n  {fs}_inodes: 500\n")
    how = assert_reported(cordon, r, f"{fs}_inodes")
    got = said(r)
    if how == "tmpfs":
        assert got["err"] == "ENOSPC" and got["got"] < 500, r
    else:
        assert how in ("memory", "none"), r
        assert got == {"got": 2000, "err": None} or no_shm(cordon, fs, got), r


def test_a_memory_balloon_ends_as_oom_every_time(root_cordon):
    """A command allocating in a loop past its 256M ends as oom, each of five
    times. At microvm the guest's own OOM killer ends it: without swap, its
    kernel used to evict and re-read the command's program from its share
    instead, for as long as the wall limit let it (the agent now sets the
    multi-gen LRU's min_ttl_ms, which calls the OOM killer then)."""
    balloon = ["python3", "-c", "x = []\nwhile True: x.append(bytearray(1 << 20))"]
    for i in range(5):
        r = root_cordon.run(balloon, "-m", "256M", "-t", "300s", timeout=400)
        assert (r.status, r.result["reason"]) == (137, "oom"), (i, r)
