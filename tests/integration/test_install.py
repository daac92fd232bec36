"""
Installed, not only built: `meson install` into a staging directory gives a
cordon that runs every level from there (the microvm level's initramfs found
where it was installed, relative to the installed executable), with its man
page, bash completion and both clients; `scripts/make-deb.sh` (make deb)
packs the same build as a Debian package that apt installs and whose cordon
checks clean; and the clients install with pip and npm with the network
gone (no build dependency fetched, no registry asked).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import BUILD, REPO, Identity, identities

LEVELS = [("namespace", ()), ("process", ()), ("gvisor", ()), ("microvm", ("--accel", "tcg"))]


def sh(argv, timeout=300, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout, **kw)


def offline(argv):
    """ARGV in a network namespace of its own (root), with no network at all."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a network namespace (the suite runs as root in CI)")
    return ["unshare", "--net", *map(str, argv)]


def clean_env(**extra):
    """An environment with no pip configuration from this machine and no index to reach."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8", "PIP_CONFIG_FILE": "/dev/null",
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "npm_config_registry": "http://127.0.0.1:9/", "npm_config_update_notifier": "false"}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def staged():
    """`meson install --destdir` of the build under test: the staged prefix, which every
    identity may read."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="cit-stage-"))
    os.chmod(root, 0o755)
    r = sh(["meson", "install", "-C", BUILD, "--destdir", root, "--quiet"], timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    [cordon] = root.glob("**/bin/cordon")
    yield cordon.parent.parent
    shutil.rmtree(root, ignore_errors=True)


def levels_of_check(out):
    lines = out.splitlines()
    found = {}
    for l in lines[lines.index("levels:") + 1:]:
        if not l.startswith("  "):
            break
        if not l.startswith("   "):
            found[l.split()[0]] = l.split(None, 1)[1]
    return found


@pytest.mark.parametrize("ident", identities(), ids=lambda i: i.name)
def test_installed_cordon_runs_every_level(staged, ident, hosttmp):
    cordon = staged / "bin" / "cordon"
    env = ident.env()
    r = sh(ident.wrap([cordon, "check"]), env=env, cwd=hosttmp)
    assert r.returncode == 0, r
    found = levels_of_check(r.stdout)
    assert all(found.get(l, "").startswith("yes") for l, _ in LEVELS), found
    out = hosttmp / "out"
    out.mkdir(mode=0o777)
    os.chmod(out, 0o777)
    for level, opts in LEVELS:
        res = out / f"{ident.name}-{level}.json"
        r = sh(ident.wrap([cordon, "run", "--level", level, *opts, "--result", res, "--",
                           "sh", "-c", "echo ran"]), env=env, cwd=hosttmp, timeout=600)
        assert r.returncode == 0 and r.stdout == "ran\n", (level, r)
        assert json.loads(res.read_text())["level"] == level


def test_installed_microvm_uses_the_installed_initramfs(staged, hosttmp):
    """The staged cordon boots the initramfs staged beside it in libexec, not the build's:
    without it, the level is refused naming where it was looked for."""
    cpio = next(staged.glob("libexec/cordon/cordon-guest.cpio"))
    assert cpio.read_bytes() == (BUILD / "cordon-guest.cpio").read_bytes()
    aside = hosttmp / "aside.cpio"
    shutil.move(cpio, aside)
    try:
        r = sh([staged / "bin" / "cordon", "run", "--level", "microvm", "--accel", "tcg", "--",
                "true"], env=Identity("root", 0, 0).env(), cwd=hosttmp)
    finally:
        shutil.move(aside, cpio)
    assert r.returncode == 125 and str(cpio) in r.stderr, r
    # a guest kernel this machine lacks is named with the installed builder
    r = sh([staged / "bin" / "cordon", "run", "--level", "microvm", "--accel", "tcg", "--",
            "true"], env=Identity("root", 0, 0).env({"CORDON_GUEST_KERNEL": hosttmp / "none"}),
           cwd=hosttmp)
    builder = staged / "libexec" / "cordon" / "build-guest-kernel"
    assert r.returncode == 125 and f"{builder} builds it" in r.stderr, r
    assert os.access(builder, os.X_OK) and (builder.parent / "kernel.config").is_file()
    r = sh([builder, "--print"], env=clean_env())
    assert r.returncode in (0, 1) and "guest/kernel.config" not in r.stderr, r


def test_installed_presets(staged, hosttmp):
    """The egress presets are installed in share/cordon/presets and found there
    by the installed cordon (relative to its executable), not the build's."""
    presets = staged / "share" / "cordon" / "presets"
    assert sorted(p.stem for p in presets.glob("*.yaml")) == \
        ["crates", "debian", "github", "go", "maven", "npm", "pypi", "rubygems"]
    pol = hosttmp / "policy.yaml"
    pol.write_text("version: 1\nnetwork:\n  allow: ['@npm']\n")
    r = sh([staged / "bin" / "cordon", "policy", "check", pol], env=clean_env(), cwd=hosttmp)
    assert r.returncode == 0, r
    out = json.loads(r.stdout)
    assert out["presets"]["npm"]["file"] == str((presets / "npm.yaml").resolve()), out
    assert out["policy"]["network"]["presets"] == ["npm@1"], out


def test_installed_man_page_and_completion(staged):
    [page] = staged.glob("share/man/man1/cordon.1")
    r = sh(["man", "-l", page], env=clean_env(MANWIDTH="100", MAN_KEEP_FORMATTING=""))
    assert r.returncode == 0, r
    assert "cordon - " in r.stdout and "audit report" in r.stdout and "SYNOPSIS" in r.stdout, \
        r.stdout[:500]
    comp = staged / "share" / "bash-completion" / "completions" / "cordon"
    script = (f"source {comp}; COMP_WORDS=(cordon audit ''); COMP_CWORD=2; "
              "COMP_LINE='cordon audit '; COMP_POINT=${#COMP_LINE}; "
              "$(complete -p cordon | sed 's/.*-F \\([^ ]*\\) .*/\\1/') cordon '' audit; "
              "echo ${COMPREPLY[@]}")
    r = sh(["bash", "-c", script])
    assert r.returncode == 0 and r.stdout.split() == ["verify", "show", "report"], r


def test_installed_clients(staged, hosttmp):
    """The Python package where Debian's python3 imports from under the prefix; the Node
    package as a directory npm installs from, offline."""
    [site] = staged.glob("lib/python3*/dist-packages")
    r = sh(["/usr/bin/python3", "-c", "import cordon; print(cordon.__file__, cordon.Client)"],
           env=clean_env(PYTHONPATH=str(site)), cwd=hosttmp)
    assert r.returncode == 0 and r.stdout.startswith(str(site / "cordon")), r
    node = staged / "share" / "cordon" / "clients" / "node"
    app = hosttmp / "app"
    app.mkdir()
    r = sh(offline(["npm", "install", "--install-links", node]), env=clean_env(), cwd=app)
    assert r.returncode == 0, r
    assert not (app / "node_modules" / "cordon-client").is_symlink()
    check_node_import(app)


def check_node_import(app):
    r = sh(["node", "--input-type=module", "-e",
            'import { Client } from "cordon-client"; console.log(typeof Client.connect)'],
           env=clean_env(), cwd=app)
    assert r.returncode == 0 and r.stdout == "function\n", r


def test_pip_install_without_the_index(hosttmp):
    """The README's command, in a fresh venv with no network: no build dependency is
    fetched (the backend is the package's own, standard library only)."""
    venv = hosttmp / "venv"
    r = sh(["/usr/bin/python3", "-m", "venv", venv], env=clean_env())
    assert r.returncode == 0, r
    src = hosttmp / "python"
    shutil.copytree(REPO / "clients" / "python", src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    r = sh(offline([venv / "bin" / "pip", "install", src]), env=clean_env(), cwd=hosttmp)
    assert r.returncode == 0 and "Successfully installed cordon-client-0.1.0" in r.stdout, r
    r = sh([venv / "bin" / "python", "-c",
            "import cordon, importlib.metadata as m; print(m.version('cordon-client'), "
            "cordon.__file__)"], env=clean_env(), cwd="/")
    assert r.returncode == 0 and r.stdout.startswith("0.1.0 " + str(venv)), r
    # editable too (PEP 660): the source directory itself is imported
    venv2 = hosttmp / "venv2"
    assert sh(["/usr/bin/python3", "-m", "venv", venv2], env=clean_env()).returncode == 0
    r = sh(offline([venv2 / "bin" / "pip", "install", "-e", src]), env=clean_env())
    assert r.returncode == 0, r
    r = sh([venv2 / "bin" / "python", "-c", "import cordon; print(cordon.__file__)"],
           env=clean_env(), cwd="/")
    assert r.stdout.strip() == str(src / "cordon" / "__init__.py"), r


def test_npm_install_without_the_registry(hosttmp):
    app = hosttmp / "app"
    app.mkdir()
    r = sh(offline(["npm", "install", REPO / "clients" / "node"]), env=clean_env(), cwd=app)
    assert r.returncode == 0, r
    check_node_import(app)


@pytest.fixture
def deb(hosttmp):
    """The package `make deb` makes from the build under test (nothing compiled again)."""
    if os.geteuid() != 0:
        pytest.skip("installing a package needs root (the suite runs as root in CI)")
    if sh(["dpkg-query", "-W", "-f=${Status}", "cordon"]).stdout.startswith("install ok"):
        pytest.skip("a cordon package is installed on this machine already: not replaced")
    before = sh(["meson", "introspect", BUILD, "--buildoptions"]).stdout
    r = sh([REPO / "scripts" / "make-deb.sh", BUILD, hosttmp], timeout=600)
    assert r.returncode == 0, r
    # the build directory keeps its own prefix
    assert sh(["meson", "introspect", BUILD, "--buildoptions"]).stdout == before
    path = pathlib.Path(r.stdout.strip())
    assert path.parent == hosttmp and path.name.startswith("cordon_"), r
    yield path
    sh(["dpkg", "--purge", "cordon"])


def test_deb_installs_with_apt_and_checks_clean(deb, hosttmp):
    info = sh(["dpkg-deb", "-f", deb, "Depends", "Recommends"]).stdout
    assert "qemu-system-x86" in info and "runsc" in info, info
    r = sh(["apt-get", "install", "-y", "-q", "--no-install-recommends", str(deb)],
           env={**clean_env(), "DEBIAN_FRONTEND": "noninteractive"}, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = sh(["/usr/bin/cordon", "check"], cwd=hosttmp)
    assert r.returncode == 0 and "cordon: " not in r.stderr, r
    found = levels_of_check(r.stdout)
    assert all(found.get(l, "").startswith("yes") for l, _ in LEVELS), found
    for level, opts in LEVELS:
        r = sh(["/usr/bin/cordon", "run", "--level", level, *opts, "--", "true"], cwd=hosttmp)
        assert r.returncode == 0, (level, r)
    assert sh(["man", "-w", "cordon"]).stdout.strip() == "/usr/share/man/man1/cordon.1.gz"
    r = sh(["/usr/bin/python3", "-c", "import cordon; print(cordon.__file__)"], cwd="/",
           env=clean_env())
    assert r.stdout.startswith("/usr/lib/python3/dist-packages/cordon/"), r
    assert os.path.isfile("/usr/libexec/cordon/cordon-guest.cpio")
    r = sh(["dpkg", "--purge", "cordon"])
    assert r.returncode == 0 and not os.path.exists("/usr/bin/cordon"), r
