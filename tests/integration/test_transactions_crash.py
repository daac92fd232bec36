"""
A transactional workspace's commit is all or nothing: under ENOSPC at each
of its steps, under kill -9 of the supervisor at random points of a
20,000-file commit, and for an ordinary caller whose change holds a
read-only directory. Afterwards the host tree is wholly the old one or
wholly the new one (a listing of every entry's path, type, mode and content
hash against both), and no name of the commit's (.cordon-txn-*) is left.

The full disk is a small tmpfs mounted in a mount namespace of the test's
own (a `sleep` started by `unshare -m`; cordon runs in it through nsenter,
the tree is read through /proc/PID/root), so the host's mounts never see it.
"""

import hashlib
import json
import os
import random
import signal
import stat
import subprocess
import time

import pytest

from conftest import cordon_cgroups, marker, pids_with, wait_until

OVERLAY = ("--workspace-mode", "overlay")
NOT_COMMITTED = 122
RESERVED = ".cordon-txn-"


def listing(root):
    """Every entry beneath ROOT: relative path -> (type and mode, content hash or link target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            what = ""
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            out[os.path.relpath(p, root)] = (oct(st.st_mode), what)
    return out


def reserved_left(root):
    return [os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs
            if n.startswith(RESERVED)]


def assert_whole(now, old, new, what):
    """NOW is OLD or NEW; a mixed tree is reported by what differs from each."""
    if now == old or now == new:
        return "old" if now == old else "new"
    def diff(a, b):
        return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))[:5]
    pytest.fail(f"{what}: the tree is neither the old nor the new one; differs from the old "
                f"at {diff(now, old)}, from the new at {diff(now, new)}")


# --- ENOSPC: a small tmpfs in a mount namespace of the test's own --------------

class MountNamespace:
    """A private mount namespace held open by a sleeping process."""

    def __init__(self):
        self.proc = subprocess.Popen(["unshare", "-m", "--propagation", "private",
                                      "sleep", "3600"])
        mine = os.readlink("/proc/self/ns/mnt")
        ok = wait_until(lambda: self._ns() not in (None, mine), 10)
        assert ok, "unshare -m did not make a mount namespace"

    def _ns(self):
        try:
            return os.readlink(f"/proc/{self.proc.pid}/ns/mnt")
        except OSError:
            return None

    def sh(self, script):
        subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m", "--", "sh", "-ec", script],
                       check=True)

    def path(self, p):
        """P as seen inside, from outside."""
        return f"/proc/{self.proc.pid}/root{p}"

    def prefix(self):
        return ["nsenter", "-t", str(self.proc.pid), "-m", "--"]

    def close(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def mount_ns():
    if os.geteuid() != 0:
        pytest.skip("a private tmpfs needs root to mount it (the suite runs as root in CI)")
    ns = MountNamespace()
    yield ns
    ns.close()


def seed(root, ident):
    """The old tree: files to change, one to remove, a directory to become a
    file and a file to become a directory, a directory to merge into."""
    os.makedirs(f"{root}/old")
    os.makedirs(f"{root}/keep")
    files = {"f1": b"a" * 9000, "f2": b"b" * 9000, "f3": b"c" * 9000, "gone": b"bye\n",
             "old/x": b"x\n", "g": b"g\n", "keep/k": b"k\n"}
    for rel, data in files.items():
        with open(f"{root}/{rel}", "wb") as f:
            f.write(data)
        os.chmod(f"{root}/{rel}", 0o644)
    for d in ("", "/old", "/keep"):
        os.chmod(f"{root}{d}", 0o755)
    for d, _, fs in os.walk(root):
        for p in [d] + [os.path.join(d, f) for f in fs]:
            os.lchown(p, ident.uid, ident.gid)


# Every kind of record: changed files, a removal, a directory replaced by a
# file and a file by a directory, a new tree with a 0555 directory holding
# entries, a new file in a merged directory whose mode changes.
CHANGE = ("for i in 1 2 3; do head -c 16384 /dev/zero | tr '\\0' $i > f$i; done; "
          "rm gone; rm -r old; echo file > old; rm g; mkdir g; echo in > g/in; "
          "mkdir -p n/m; echo a > n/a; echo b > n/m/b; ln -s a n/l; chmod 555 n/m n; "
          "echo k2 > keep/k2; chmod 700 keep")


def overlay_run(cordon, ns, ws):
    """cordon run -w WS --workspace-mode overlay -- CHANGE, inside NS; the result parsed."""
    res = cordon.hostdir() / "result.json"
    argv = cordon.argv("run", "-q", "-w", ws, *OVERLAY, "--result", res, "--", "sh", "-c",
                       CHANGE)
    p = subprocess.run((ns.prefix() if ns else []) + argv, env=cordon.ident.env(),
                       cwd=cordon.tmp, capture_output=True, text=True, timeout=120)
    return p.returncode, json.loads(res.read_text()), p.stderr


def test_overlay_commit_is_whole_on_a_full_disk(cordon, mount_ns):
    """Room for none, part or all of the change, by inodes and by bytes: the
    commit fails at each of its steps (the directory, staging, the journal,
    the marker after every rename) and the tree is the old one, or it
    commits and the tree is the new one."""
    ref = cordon.hostdir("ref")
    seed(ref, cordon.ident)
    old = listing(ref)
    status, result, err = overlay_run(cordon, None, ref)
    assert (status, result["transaction"]["outcome"]) == (0, "committed"), (err, result)
    new = listing(ref)
    assert new != old

    mnt = cordon.hostdir("mnt")
    reasons = []
    for limit in ("nr_inodes", "size"):
        for extra in range(0, 64):
            mount_ns.sh(f"mount -t tmpfs -o size=4M,nr_inodes=4096,mode=0755 tmpfs {mnt}")
            ws = f"{mnt}/ws"
            seed(mount_ns.path(ws), cordon.ident)
            st = os.statvfs(mount_ns.path(ws))
            if limit == "nr_inodes":
                value = st.f_files - st.f_ffree + extra
            else:
                value = (st.f_blocks - st.f_bfree + 3 * extra) * st.f_frsize
            mount_ns.sh(f"mount -o remount,{limit}={value} tmpfs {mnt}")
            status, result, err = overlay_run(cordon, mount_ns, ws)
            t = result["transaction"]
            now = listing(mount_ns.path(ws))
            left = reserved_left(mount_ns.path(ws))
            mount_ns.sh(f"umount {mnt}")
            got = assert_whole(now, old, new, f"{limit} +{extra}")
            assert not left, (limit, extra, t, left)
            if t["outcome"] == "committed":
                assert status == 0 and got == "new", (limit, extra, t)
                break
            assert got == "old", (limit, extra, t)
            assert (status, t["outcome"]) == (NOT_COMMITTED, "failed"), (limit, extra, t, err)
            assert "No space left" in t["reason"] and "nothing was applied" in t["reason"], t
            reasons.append(t["reason"])
        else:
            pytest.fail(f"{limit}: never committed")
    # Each step of the protocol met the full disk at least once.
    for step in ("cannot make '.cordon-txn-", "cannot stage", "cannot write the commit's",
                 "cannot mark the commit done"):
        assert any(step in r for r in reasons), (step, reasons)


def test_overlay_new_read_only_directory_commits_whole(cordon):
    """A new 0555 directory holding new entries (and a merged one made 0555
    with a new file): as an ordinary caller its mode came first and the
    commit failed half way; now modes come last."""
    ws = cordon.hostdir("ws")
    (ws / "keep").mkdir()
    os.chown(ws / "keep", cordon.ident.uid, cordon.ident.gid)
    script = ("mkdir -p ro/sub && echo f > ro/f && echo g > ro/sub/g && chmod 444 ro/f && "
              "chmod 555 ro/sub ro && echo k > keep/k && chmod 555 keep")
    r = cordon.run(["sh", "-c", script], "-w", ws, *OVERLAY)
    assert (r.status, r.result["transaction"]["outcome"]) == (0, "committed"), r
    modes = {p: stat.S_IMODE(os.lstat(ws / p).st_mode) for p in ("ro", "ro/sub", "ro/f", "keep")}
    assert modes == {"ro": 0o555, "ro/sub": 0o555, "ro/f": 0o444, "keep": 0o555}, modes
    assert (ws / "ro/f").read_text() == "f\n" and (ws / "ro/sub/g").read_text() == "g\n"
    assert (ws / "keep/k").read_text() == "k\n"
    assert not reserved_left(ws), reserved_left(ws)
    assert os.lstat(ws / "ro/sub/g").st_uid == cordon.ident.uid


# --- kill -9 of the supervisor mid-commit -------------------------------------

N_MOD, N_DEL, N_NEW = 10000, 2000, 8000

BIG_CHANGE = f"""
import os, shutil
for i in range({N_MOD}):
    with open(f"mod/{{i}}", "w") as f:
        f.write(f"new {{i}}\\n")
shutil.rmtree("del")
os.makedirs("new/a")
for i in range({N_NEW}):
    fd = os.open(f"new/a/{{i}}", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, f"{{i}}\\n".encode())
    os.fchmod(fd, 0o644)
    os.close(fd)
os.chmod("new/a", 0o555)
os.chmod("new", 0o755)
"""


def big_seed(cordon):
    ws = cordon.hostdir()
    for d in ("mod", "del"):
        (ws / d).mkdir(mode=0o755)
    for i in range(N_MOD):
        (ws / f"mod/{i}").write_text(f"old {i}\n")
    for i in range(N_DEL):
        (ws / f"del/{i}").write_text(f"gone {i}\n")
    for d, _, fs in os.walk(ws):
        for p in [d] + [os.path.join(d, f) for f in fs]:
            os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
            os.lchown(p, cordon.ident.uid, cordon.ident.gid)
    return ws


def big_expected(old):
    new = {k: v for k, v in old.items() if k != "del" and not k.startswith("del/")}
    for i in range(N_MOD):
        new[f"mod/{i}"] = (oct(0o100644), hashlib.sha256(f"new {i}\n".encode()).hexdigest())
    new["new"] = (oct(0o40755), "")
    new["new/a"] = (oct(0o40555), "")
    for i in range(N_NEW):
        new[f"new/a/{i}"] = (oct(0o100644), hashlib.sha256(f"{i}\n".encode()).hexdigest())
    return new


def txn_file(ws, name):
    """The path of NAME in the commit's directory, once there is one."""
    for n in os.listdir(ws):
        if n.startswith(RESERVED) and "." not in n[len(RESERVED):]:
            return os.path.join(ws, n, name)
    return None


def kill_mid_commit(cordon, ws, phase, also_watchdog, audit=None):
    """Start the big change; once the commit's PHASE file appears (observed,
    not timed), wait a random moment and kill -9 the supervisor (and first
    its watchdog). What the tree may become: 'old', 'new', or 'either'."""
    mark = marker()
    extra = ["--audit", audit] if audit else []
    p = cordon.popen(["python3", "-c", BIG_CHANGE, mark], "-q", "-w", ws, *OVERLAY, *extra,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    seen = None
    while p.poll() is None and time.monotonic() < deadline:
        f = txn_file(ws, phase)
        if f and os.path.exists(f):
            seen = f
            break
    if not seen:
        p.wait(timeout=300)
        return None, mark, p.pid
    time.sleep(random.uniform(0, 0.03))
    if also_watchdog:
        for q in pids_with(mark):
            with open(f"/proc/{q}/comm") as c:
                if c.read().strip() == "cordon-watchdog":
                    os.kill(q, signal.SIGKILL)
    before = os.path.exists(os.path.join(os.path.dirname(seen), "committed"))
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    after = os.path.exists(os.path.join(os.path.dirname(seen), "committed"))
    return ("new" if before else "old" if not after else "either"), mark, p.pid


def killed_at_journal(cordon):
    """A seeded workspace whose commit was killed, supervisor and watchdog, once its
    journal was written: (the workspace, its old and new listings, which is expected)."""
    ws = big_seed(cordon)
    old = listing(ws)
    new = big_expected(old)
    expect, _, pid = kill_mid_commit(cordon, ws, "journal", also_watchdog=True)
    remove_cgroups_of(pid)
    assert expect, "the commit ended before its journal was seen"
    assert reserved_left(ws), "nothing was left to recover"
    return ws, old, new, expect


def remove_cgroups_of(pid):
    """The run's cgroups, which its killed watchdog no longer removes."""
    for d in cordon_cgroups():
        if os.path.basename(d).startswith(f"cordon-{pid}-"):
            wait_until(lambda: _rmdir(d), 30)


def _rmdir(d):
    try:
        os.rmdir(d)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def test_overlay_commit_survives_kill_9(cordon):
    """The watchdog finishes (past the marker) or undoes (before it) a
    20,000-file commit whose supervisor was killed, at each phase and once
    more at a random one: the tree is whole, nothing of the commit left."""
    phases = ["intent", "journal", "committed", random.choice(["intent", "journal", "committed"])]
    ends = []
    for phase in phases:
        ws = big_seed(cordon)
        old = listing(ws)
        new = big_expected(old)
        audit = cordon.hostdir() / "audit.log"
        expect, mark, _ = kill_mid_commit(cordon, ws, phase, also_watchdog=False, audit=audit)
        assert expect, f"the commit ended before {phase} was seen"
        assert wait_until(lambda: not pids_with(mark), 240), "the watchdog did not finish"
        got = assert_whole(listing(ws), old, new, f"killed at {phase}")
        assert expect in (got, "either"), (phase, expect, got)
        assert not reserved_left(ws), reserved_left(ws)
        # The watchdog's run.end says what became of the commit.
        end = [json.loads(line) for line in audit.read_text().splitlines()][-1]
        assert end["type"] == "run.end" and end["reason"] == "killed", end
        assert end["workspace_commit"] in ({"finished", "none"} if got == "new"
                                           else {"undone"}), (got, end)
        ends.append(got)
    assert {"old", "new"} <= set(ends), list(zip(phases, ends))


def test_overlay_commit_recovered_by_check_and_next_run(cordon):
    """Supervisor and watchdog both killed: `cordon check -w` undoes a commit
    killed before its marker; a run on a workspace left so past the marker
    finishes it first, and sees the whole new tree."""
    ws, old, new, expect = killed_at_journal(cordon)
    r = cordon.raw("check", "-w", ws)
    assert r.status == 0 and "interrupted commit" in r.out, r
    got = assert_whole(listing(ws), old, new, "killed at journal")
    assert expect in (got, "either"), (expect, got)
    assert ("finished 1" if got == "new" else "undid 1") in r.out, r
    assert not reserved_left(ws)

    ws = big_seed(cordon)
    expect, _, pid = kill_mid_commit(cordon, ws, "committed", also_watchdog=True)
    remove_cgroups_of(pid)
    assert expect == "new", "the commit ended before its marker was seen"
    assert reserved_left(ws), "nothing was left to recover"
    r = cordon.run(["sh", "-c", "ls -a; cat mod/7"], "-w", ws)
    assert r.status == 0, r
    assert RESERVED not in r.out and r.out.endswith("new 7\n"), r
    assert_whole(listing(ws), old, new, "killed at committed, then a run") == "new"
    assert not reserved_left(ws)


OTHER_UID = 4242  # a user who is neither the caller nor nobody: the run cannot touch their files

FORGE = r"""
set -e
cd /mnt/w
ino=$(stat -c %i other/f)
hex() { printf %s "$1" | od -An -tx1 | tr -d ' \n'; }
rm -f other/f 2>/dev/null && echo "deleted it myself" || true
id=00112233445566ff
umask 077; mkdir .cordon-txn-$id
printf 'cordon-txn 1 %s\ndel 0 %s 0 %s\nmode 0 0 777 %s\nend\n' $id $ino "$(hex other/f)" \
    "$(hex other)" > .cordon-txn-$id/journal
: > .cordon-txn-$id/committed
echo forged
"""


def test_forged_journal_recovers_no_more_than_the_run_could_do(cordon):
    """A run that writes the workspace (-w in direct mode, or a --rw bind of
    it, as here at every level) can leave a .cordon-txn-* directory of its
    own making, marked committed, whose journal deletes a
    file of another user's (and opens their directory to all) that the run
    itself cannot touch. Recovery (the next run's, and `cordon check -w` by
    root, whoever the run was) acts as the directory's owner without
    capabilities: it does no more than the run could, and the file stays."""
    ws = cordon.hostdir("ws")
    os.chmod(ws, 0o755)
    other = ws / "other"
    other.mkdir()
    (other / "f").write_text("theirs\n")
    for p in (other, other / "f"):
        os.chown(p, OTHER_UID, OTHER_UID)
    os.chmod(other, 0o755)
    before = listing(other)
    r = cordon.run(["sh", "-c", FORGE], "--rw", f"{ws}:/mnt/w")
    assert r.status == 0 and "forged" in r.out, r
    assert "deleted it myself" not in r.out, "the run could delete the file: no premise"
    # The next run recovers first; root's check does too.
    cordon.run(["true"], "-w", ws)
    subprocess.run([cordon.bin, "check", "-w", str(ws)], capture_output=True, timeout=60)
    assert (other / "f").read_text() == "theirs\n", "a forged journal deleted another's file"
    assert listing(other) == before
    assert stat.S_IMODE(os.stat(other).st_mode) == 0o755
