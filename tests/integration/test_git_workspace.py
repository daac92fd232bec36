"""
Git in a host workspace (-w): the run's repository work is the run's, what git
would run later on the host is not (issue 27, item 1).

Every listed git command works inside, as root and as nobody, written
directly and through an overlay; afterwards the host's git sees the commits,
branches, tags, the worktree and the clone. Next to it, the attack: one run
plants every config key of cordon's table (`cordon check --json`), hooks,
info/attributes naming a driver, gitdir links out, in the repository, a
nested clone and a bare repository. Afterwards none of it is in the host's
repositories (the user's own alias and hooks are), each refusal is named in
the result, the audit's run.end and on stderr, and the host's git status,
diff, commit, fetch, alias, ssh and credential calls run no program: each
planted one would have touched a marker file.
"""

import json
import os
import subprocess

import pytest

OVERLAY = ("--workspace-mode", "overlay")

WORKFLOW = r"""set -e
git init -q -b main .
git config user.email agent@example.com
git config user.name agent
echo one > f && git add f && git commit -qm one
git branch feature && git checkout -q feature
echo two >> f && git commit -qam two
git checkout -q main
echo three > g && git add g && git commit -qm three
git merge -q --no-edit feature
git checkout -q -b topic HEAD~1
echo four > h && git add h && git commit -qm four
git rebase -q main
git checkout -q main
echo dirty >> g && git stash -q && git stash pop -q && git checkout -q -- g
git tag v1 && git tag -a v2 -m v2
git worktree add -q wt topic
git clone -q /src clone
git clone -q --no-hardlinks . selfclone
echo done
"""


def host_git(cordon, *args, cwd=None, check=True, env=None):
    """git as the test's identity on the host, with no config of the user's."""
    e = cordon.ident.env({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1",
                          **(env or {})})
    r = subprocess.run(cordon.ident.wrap(["git", *args]), cwd=cwd, env=e, capture_output=True,
                       text=True, timeout=60)
    if check:
        assert r.returncode == 0, r
    return r


@pytest.fixture
def source_repo(cordon, hosttmp):
    """A repository another uid owns, bound read-only at /src (safe.directory: item 2)."""
    src = hosttmp / "src"
    src.mkdir()
    git = ["git", "-c", "user.name=o", "-c", "user.email=o@example.com", "-C", str(src)]
    subprocess.run(git + ["init", "-q", "-b", "main"], check=True)
    (src / "readme").write_text("upstream\n")
    subprocess.run(git + ["add", "readme"], check=True)
    subprocess.run(git + ["commit", "-qm", "upstream"], check=True)
    for d, _, files in os.walk(src):
        for f in [d] + [os.path.join(d, f) for f in files]:
            os.chown(f, 4321, 4321)
    return src


@pytest.mark.parametrize("mode", ["direct", "overlay"])
def test_git_commands_work_in_the_workspace(cordon, source_repo, mode):
    ws = cordon.hostdir("ws")
    opts = ["-w", ws, "--ro", f"{source_repo}:/src"] + (list(OVERLAY) if mode == "overlay" else [])
    r = cordon.run(["sh", "-c", WORKFLOW], *opts, timeout=120)
    assert (r.status, r.out) == (0, "done\n"), r
    assert r.result["workspace"]["git_refused"] == 0, r.result
    if mode == "overlay":
        t = r.result["transaction"]
        assert t["outcome"] == "committed" and t["git_refused"] == 0, t
    # The host's git sees it all: commits, branches, tags, the worktree, the clones.
    main = host_git(cordon, "-C", ws, "log", "--format=%s", "main").stdout.splitlines()
    assert main[0].startswith("Merge") and {"one", "two", "three"} <= set(main), main
    branches = host_git(cordon, "-C", ws, "branch", "--format=%(refname:short)").stdout.split()
    assert {"main", "feature", "topic"} <= set(branches), branches
    assert host_git(cordon, "-C", ws, "tag").stdout.split() == ["v1", "v2"]
    topic = host_git(cordon, "-C", ws, "log", "--format=%s", "topic").stdout.splitlines()
    assert topic[0] == "four" and topic[1].startswith("Merge"), topic  # rebased onto main
    assert host_git(cordon, "-C", ws / "wt", "rev-parse", "--abbrev-ref", "HEAD").stdout == \
        "topic\n"
    assert host_git(cordon, "-C", ws / "clone", "log", "--format=%s").stdout == "upstream\n"
    assert host_git(cordon, "-C", ws / "selfclone", "log", "-1", "--format=%s").stdout == \
        main[0] + "\n"
    host_git(cordon, "-C", ws, "fsck", "--no-progress")
    host_git(cordon, "-C", ws, "stash", "list")


def planted_keys(cordon, marks):
    """Every key of the table, as config text, each running `touch MARKS/<key>` if run."""
    r = cordon.raw("check", "--json")
    keys = json.loads(r.out)["protected"]["git_config_keys"]
    assert len(keys) > 40, keys
    sections = {}
    for row in keys:
        parts = row["key"].replace("*", "x").split(".")
        if parts[-1] == "x":
            parts[-1] = "evil"  # "alias.*": a name in the section
        section, name = parts[0], parts[-1]
        sub = ".".join(parts[1:-1])
        mark = f"{marks}/{row['key'].replace('*', 'x')}"
        value = {"escapes": "/tmp", "ext": f"ext::sh -c touch% {mark}",
                 "!": f"!touch {mark}"}.get(row["when"], f"touch {mark}")
        if section in ("alias", "credential"):
            value = f"!touch {mark}"
        if section in ("include", "includeif"):
            value = "../evil.inc"
        head = f'[{section} "{sub}"]' if sub else f"[{section}]"
        sections.setdefault(head, []).append(f"\t{name} = {value}")
    # Ones the host's commands below would run, spelled as a user's config would.
    sections.setdefault('[includeIf "gitdir:/"]', []).append("\tpath = ../evil.inc")
    sections.setdefault('[remote "x"]', []).append("\turl = .")
    return "".join(f"{h}\n" + "\n".join(lines) + "\n" for h, lines in sections.items())


def plant_script(marks, config_text):
    hook = f"#!/bin/sh\ntouch {marks}/hook-$(basename $0)\n"
    return rf"""set -e
cat >> .git/config <<'CFG'
{config_text}CFG
printf '[core]\n\tfsmonitor = touch {marks}/included\n' > evil.inc
mkdir -p evilhooks
for h in pre-commit commit-msg post-commit post-checkout; do
  printf '{hook}' > .git/hooks/$h && chmod +x .git/hooks/$h
  printf '{hook}' > evilhooks/$h && chmod +x evilhooks/$h
done
echo 'touch {marks}/hook-user-changed' >> .git/hooks/pre-push
rm .git/hooks/post-merge
echo 'touch {marks}/hook-d-changed' >> .git/hooks/pre-commit.d/lint
printf '{hook}' > .git/hooks/pre-commit.d/evil && chmod +x .git/hooks/pre-commit.d/evil
mkdir -p .git/info && echo '* filter=x diff=x' > .git/info/attributes
echo '* filter=x' > .gitattributes
mkdir -p out && echo 'gitdir: /etc' > out/.git
git clone -q /src nested
printf '[core]\n\tfsmonitor = touch {marks}/nested\n' >> nested/.git/config
mkdir -p vendor/lib/.git/hooks && printf '{hook}' > vendor/lib/.git/hooks/post-checkout
git init -q --bare bare.git
printf '[core]\n\thooksPath = ../evilhooks\n' >> bare.git/config
echo planted
"""


def user_repo(cordon):
    """A repository of the user's: their own alias (a '!' one) and hooks, which stay."""
    ws = cordon.hostdir("repo")
    host_git(cordon, "init", "-q", "-b", "main", cwd=ws)
    host_git(cordon, "config", "user.email", "u@example.com", cwd=ws)
    host_git(cordon, "config", "user.name", "u", cwd=ws)
    host_git(cordon, "config", "alias.mine", "!echo mine", cwd=ws)
    (ws / ".git/hooks/pre-commit.d").mkdir()  # a hook manager's scripts
    for name in ("pre-push", "post-merge", "pre-commit.d/lint"):
        (ws / ".git/hooks" / name).write_text("#!/bin/sh\ntrue\n")
        os.chmod(ws / ".git/hooks" / name, 0o755)
    for name in ("pre-push", "post-merge", "pre-commit.d", "pre-commit.d/lint"):
        os.chown(ws / ".git/hooks" / name, cordon.ident.uid, cordon.ident.gid)
    (ws / "a").write_text("a\n")
    os.chown(ws / "a", cordon.ident.uid, cordon.ident.gid)
    host_git(cordon, "add", "a", cwd=ws)
    host_git(cordon, "commit", "-qm", "first", cwd=ws)
    return ws


def hooks(ws):
    """Every entry of .git/hooks, its mode and bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(ws / ".git/hooks"):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, ws)] = (st.st_mode, os.path.isfile(p) and open(p, "rb").read())
    return out


def nothing_runs(cordon, ws, marks):
    """The host's everyday git in each repository: no planted program runs."""
    (ws / "a").write_text("changed\n")
    os.chown(ws / "a", cordon.ident.uid, cordon.ident.gid)
    for repo in (ws, ws / "nested", ws / "bare.git"):
        host_git(cordon, "-C", repo, "status", check=False)
    host_git(cordon, "-C", ws, "diff", check=False)
    host_git(cordon, "-C", ws, "log", "-1", check=False)
    host_git(cordon, "-C", ws, "commit", "-qam", "host", check=False)
    host_git(cordon, "-C", ws, "evil", check=False)  # alias.evil
    host_git(cordon, "-C", ws, "mine")                # the user's own alias still works
    host_git(cordon, "-C", ws, "fetch", "-q", "x", check=False)
    host_git(cordon, "-C", ws, "ls-remote", "ssh://127.0.0.1:1/x", check=False)
    subprocess.run(cordon.ident.wrap(["git", "-C", str(ws), "credential", "fill"]),
                   input="protocol=https\nhost=example.com\n\n", text=True, capture_output=True,
                   env=cordon.ident.env({"GIT_TERMINAL_PROMPT": "0"}), timeout=60)
    assert sorted(os.listdir(marks)) == [], "programs the run planted ran on the host"


def config_keys(cordon, path):
    """The keys and values of a config file as git reads it (--list only parses)."""
    return host_git(cordon, "config", "--file", path, "--no-includes", "--list").stdout


def audit_end(audit):
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    ends = [e for e in events if e.get("type") == "run.end"]
    assert len(ends) == 1, ends
    return json.dumps(ends[0])


def test_what_git_would_run_is_refused_direct(cordon, source_repo):
    ws = user_repo(cordon)
    marks = cordon.hostdir("marks", mode=0o777)
    audit = cordon.hostdir("audit") / "audit.log"
    config_before = config_keys(cordon, ws / ".git/config")
    hooks_before = hooks(ws)
    r = cordon.run(["sh", "-c", plant_script(marks, planted_keys(cordon, marks))], "-w", ws,
                   "--ro", f"{source_repo}:/src", "--audit", audit, timeout=120)
    assert (r.status, r.out) == (0, "planted\n"), r
    # The config: the user's keys as they were, and of the run's only what runs nothing.
    assert config_keys(cordon, ws / ".git/config") == config_before + "remote.x.url=.\n"
    assert "fsmonitor" not in (ws / "nested/.git/config").read_text()
    assert "hookspath" not in (ws / "bare.git/config").read_text().lower()
    assert hooks(ws) == hooks_before
    assert not (ws / ".git/info/attributes").exists()
    assert not os.path.lexists(ws / "out/.git")
    # A .git that is no repository yet is one after a git init there, which keeps its hooks.
    assert not (ws / "vendor/lib/.git/hooks/post-checkout").exists()
    # The rest of the run's work stays: its files, the clone, the bare repository.
    assert (ws / "evil.inc").exists() and (ws / "nested/readme").exists()
    w = r.result["workspace"]
    assert w["git_refused"] > 50, w
    said = [l for l in r.err.splitlines() if l.startswith("cordon: workspace: git: ")]
    assert len(said) == min(w["git_refused"], 96) + (w["git_refused"] > 96), r.err
    for what in ("refused core.fsmonitor in .git/config", "removed the hook .git/hooks/post-commit",
                 "put back the hook .git/hooks/pre-push", "put back the hook .git/hooks/post-merge",
                 "removed the hook .git/hooks/pre-commit.d/evil",
                 "put back the hook .git/hooks/pre-commit.d/lint"):
        assert any(what in line for line in w["git"]), (what, w["git"])
    assert "refused core.fsmonitor in .git/config" in audit_end(audit)
    nothing_runs(cordon, ws, marks)


def test_what_git_would_run_is_refused_overlay(cordon, source_repo):
    """Through an overlay each such entry is refused alone: the rest of the change commits."""
    ws = user_repo(cordon)
    marks = cordon.hostdir("marks", mode=0o777)
    config_before = (ws / ".git/config").read_text()
    hooks_before = hooks(ws)
    audit = cordon.hostdir("audit") / "audit.log"
    r = cordon.run(["sh", "-c", plant_script(marks, planted_keys(cordon, marks))], "-w", ws,
                   "--ro", f"{source_repo}:/src", "--audit", audit, *OVERLAY, timeout=120)
    assert (r.status, r.out) == (0, "planted\n"), r
    assert "refused the hook .git/hooks/post-commit" in audit_end(audit)
    t = r.result["transaction"]
    assert t["outcome"] == "committed" and t["git_refused"] >= 8, t
    assert (ws / ".git/config").read_text() == config_before
    assert hooks(ws) == hooks_before
    assert not (ws / ".git/info/attributes").exists()
    assert not os.path.lexists(ws / "out/.git")
    assert not (ws / "nested/.git/config").exists() and (ws / "nested/readme").exists()
    assert not (ws / "bare.git/config").exists() and (ws / "bare.git/HEAD").exists()
    assert not (ws / "vendor/lib/.git/hooks/post-checkout").exists()
    assert (ws / "evil.inc").exists() and (ws / ".gitattributes").exists()
    said = [l for l in r.err.splitlines() if l.startswith("cordon: workspace: git: ")]
    assert any("refused the hook .git/hooks/post-commit" in l for l in said), r.err
    nothing_runs(cordon, ws, marks)


def long_entries(marks):
    """
    Entries whose key is longer than the 256 bytes the scan reads, each read as a key cut inside
    its subsection before afc11d4, which no rule matched. The host's git runs the first three
    (a credential helper for a long host, a long remote's upload-pack, a long filter's clean);
    core.fsmonitor and core.sshCommand under a long subsection it does not, but they must go too.
    """
    host = ".".join(["h" * 60] * 5) + ".example.com"
    remote, filt, sub = "r" * 300, "f" * 300, "c" * 300
    config = (f'[credential "https://{host}"]\n\thelper = !touch {marks}/credential; echo\n'
              f'[remote "{remote}"]\n\turl = .\n\tuploadpack = touch {marks}/uploadpack; exit 1 #\n'
              f'[filter "{filt}"]\n\tclean = touch {marks}/filter; cat\n'
              f'[core "{sub}"]\n\tfsmonitor = touch {marks}/fsmonitor\n'
              f'\tsshCommand = touch {marks}/sshcommand\n')
    script = f"""set -e
cat >> .git/config <<'CFG'
{config}CFG
echo '* filter={filt}' > .gitattributes
echo planted
"""
    return host, remote, script


@pytest.mark.parametrize("mode", ["direct", "overlay"])
def test_entries_past_the_key_bound_are_refused(cordon, mode):
    """A credential helper behind a 300-byte subsection (and its kin) does not reach the host."""
    ws = user_repo(cordon)
    marks = cordon.hostdir("marks", mode=0o777)
    config_before = config_keys(cordon, ws / ".git/config")
    host, remote, script = long_entries(marks)
    r = cordon.run(["sh", "-c", script], "-w", ws, *(OVERLAY if mode == "overlay" else ()),
                   timeout=120)
    assert (r.status, r.out) == (0, "planted\n"), r
    # Each entry refused, and named as refused: none of them is in the host's config.
    notes = r.result["transaction" if mode == "overlay" else "workspace"]
    assert notes["git_refused"] == 6, notes
    assert sorted(line.split(".")[0] for line in notes["git"]) == \
        ["refused core"] * 2 + ["refused credential", "refused filter"] + ["refused remote"] * 2
    said = [l for l in r.err.splitlines() if l.startswith("cordon: workspace: git: refused ")]
    assert len(said) == 6, r.err
    if mode == "overlay":
        assert notes["outcome"] == "committed", notes
    assert config_keys(cordon, ws / ".git/config") == config_before
    for pattern in ("helper", "uploadpack", "clean", "fsmonitor", "sshcommand"):
        got = host_git(cordon, "config", "--file", ws / ".git/config", "--no-includes",
                       "--get-regexp", pattern, check=False)
        assert (got.returncode, got.stdout) == (1, ""), (pattern, got)
    assert (ws / ".gitattributes").exists()  # the rest of the run's work stays
    # The host's git where each would run: nothing does.
    e = cordon.ident.env({"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"})
    subprocess.run(cordon.ident.wrap(["git", "-C", str(ws), "credential", "fill"]),
                   input=f"protocol=https\nhost={host}\n\n", text=True, capture_output=True,
                   env=e, timeout=60)
    host_git(cordon, "-C", ws, "fetch", "-q", remote, check=False)
    (ws / "a").write_text("changed\n")
    os.chown(ws / "a", cordon.ident.uid, cordon.ident.gid)
    host_git(cordon, "-C", ws, "add", "a", check=False)
    host_git(cordon, "-C", ws, "status", check=False)
    host_git(cordon, "-C", ws, "ls-remote", "ssh://127.0.0.1:1/x", check=False)
    assert sorted(os.listdir(marks)) == [], "programs the run planted ran on the host"


# Directories git takes for repositories (is_git_directory(): a valid HEAD, access(X_OK) of
# objects and refs, or of a commondir's) that the scan once did not: each holds an alias that
# touches marks/NAME. "commondir" is the common dir a pointer leads to (objects, refs and a
# config, no HEAD); "linked" leads to it through a commondir that is a link to a file.
GIT_SHAPES = r"""set -e
cd "$1"
mkdir -p refsfile/objects
printf 'ref: refs/heads/main\n' > refsfile/HEAD
printf '#!/bin/sh\n' > refsfile/refs && chmod 755 refsfile/refs
mkdir -p links/refs
ln -s refs/heads/main links/HEAD
ln -s ../refsfile/objects links/objects
mkdir -p common/objects common/refs pointer
printf 'ref: refs/heads/main\n' > pointer/HEAD
echo ../common > pointer/commondir
mkdir -p common2/objects common2/refs linked
printf 'ref: refs/heads/main\n' > linked/HEAD
echo ../common2 > common2-path
ln -s ../common2-path linked/commondir
for d in refsfile links common common2; do
    printf '[alias]\n\tevil = !touch %s/%s\n' "$2" "$d" > $d/config
done
echo planted
"""


@pytest.mark.parametrize("mode", ["direct", "overlay"])
@pytest.mark.parametrize("shape", ["refsfile", "links", "pointer", "linked"])
def test_what_git_takes_for_a_repository_is_scanned(cordon, shape, mode):
    """
    A run makes what git takes for a repository, named as none (a 0755 file refs, a HEAD and
    objects that are links, a commondir to a directory with no HEAD, one through a link): the
    planted alias is gone, or the pointer to it, and named; the host's git there runs nothing.
    The same tree made by the test itself does run it: the shapes are repositories to git.
    Through an overlay the entry is refused alone, and the rest of the change commits.
    """
    config = {"refsfile": "refsfile", "links": "links", "pointer": "common", "linked": "common2"}
    control, control_marks = cordon.hostdir("control"), cordon.hostdir("control-marks", 0o777)
    subprocess.run(["sh", "-c", GIT_SHAPES, "sh", control, control_marks], check=True,
                   capture_output=True)
    for dirpath, dirnames, filenames in os.walk(control):
        for n in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            os.lchown(n, cordon.ident.uid, cordon.ident.gid)
    host_git(cordon, "-C", control / shape, "evil", check=False)
    assert os.listdir(control_marks) == [config[shape]], "git took no repository there"

    ws = cordon.hostdir("ws")
    marks = cordon.hostdir("marks", mode=0o777)
    r = cordon.run(["sh", "-c", GIT_SHAPES, "sh", ".", marks], "-w", ws,
                   *(OVERLAY if mode == "overlay" else ()), timeout=120)
    assert (r.status, r.out) == (0, "planted\n"), r
    notes = r.result["transaction" if mode == "overlay" else "workspace"]["git"]
    if shape in ("refsfile", "links"):
        what = f"refused alias.evil in {shape}/config"
        config = ws / shape / "config"
        assert not config.exists() or "evil" not in config.read_text()
    else:
        what = f"{'refused' if mode == 'overlay' else 'removed'} {shape}/commondir"
        assert not os.path.lexists(ws / shape / "commondir")
        assert (ws / shape / "HEAD").exists()  # the rest of the run's work stays
    assert any(what in line for line in notes), (what, notes)
    if mode == "direct":
        said = [l for l in r.err.splitlines() if l.startswith("cordon: workspace: git: ")]
        assert any(what in line for line in said), r.err
    host_git(cordon, "-C", ws / shape, "evil", check=False)
    host_git(cordon, "-C", ws / shape, "status", check=False)
    assert os.listdir(marks) == [], "a program the run planted ran on the host"


def test_a_linked_worktree_is_left_as_it_was(cordon):
    """
    The positive control: a linked worktree's git directory (HEAD and a commondir to the main
    .git) is a repository to the scan too, recorded before the run. The user's own entries
    there stay, its commondir stays, and git works in the worktree after the run's commit (in
    the main one: the worktree's .git names the host's path, not /workspace).
    """
    ws = user_repo(cordon)
    host_git(cordon, "worktree", "add", "-q", "-b", "topic", "wt", cwd=ws)
    host_git(cordon, "config", "extensions.worktreeConfig", "true", cwd=ws)
    host_git(cordon, "config", "--worktree", "core.pager", "less -R", cwd=ws / "wt")
    gitdir = ws / ".git/worktrees/wt"
    (gitdir / "hooks").mkdir()  # git never runs these: the user's all the same
    (gitdir / "hooks/pre-commit").write_text("#!/bin/sh\ntrue\n")
    for p in (gitdir / "hooks", gitdir / "hooks/pre-commit"):
        os.chown(p, cordon.ident.uid, cordon.ident.gid)
    before = {n: (gitdir / n).read_bytes() for n in ("commondir", "config.worktree",
                                                    "hooks/pre-commit")}
    r = cordon.run(["sh", "-c", "echo w > w && git add w && "
                    "git -c user.name=a -c user.email=a@example.com commit -qm w && echo done"],
                   "-w", ws, timeout=120)
    assert (r.status, r.out) == (0, "done\n"), r
    assert r.result["workspace"]["git_refused"] == 0, r.result["workspace"]
    assert {n: (gitdir / n).read_bytes() for n in before} == before
    assert host_git(cordon, "-C", ws / "wt", "log", "-1", "--format=%s", "main").stdout == "w\n"
    assert host_git(cordon, "-C", ws / "wt", "config", "core.pager").stdout == "less -R\n"
