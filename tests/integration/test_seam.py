"""
The run path's seam, driven from one process as a daemon or an embedder
drives it: two runs prepared and started at once, and a prepared run
released without a start, which must leave nothing on the host.
"""

import json
import os
import shutil
import subprocess

import pytest

from conftest import BUILD, host_state, new_leftovers


def seam(identity, seam_bin, *args, **kw):
    kw.setdefault("timeout", 60)
    return subprocess.run(identity.wrap([seam_bin, *args]), env=identity.env(),
                          capture_output=True, text=True, cwd="/", **kw)


def test_two_runs_prepared_and_started_from_one_process(identity, seam_bin):
    r = seam(identity, seam_bin, "concurrent", "limits.wall=20s")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    a, b = json.loads(lines[0]), json.loads(lines[1])
    assert (a["label"], a["exit_code"], a["reason"]) == ("from-a\n", 3, "exited"), a
    assert (b["label"], b["exit_code"], b["reason"]) == ("from-b\n", 0, "exited"), b
    assert a["run_id"] != b["run_id"]
    # B ended while A still slept: each run was supervised on its own.
    assert b["wall_us"] < a["wall_us"], (a, b)
    assert lines[2] == "children 0", r.stdout


@pytest.mark.parametrize("extra", [[], ["network.allow=example.test"],
                                   ["limits.memory=64M", "limits.best_effort=memory"]],
                         ids=["plain", "gateway", "cgroup"])
def test_prepared_run_released_without_start_leaves_nothing(identity, seam_bin, hosttmp, extra):
    log = hosttmp / "audit.log"
    os.chown(hosttmp, identity.uid, identity.gid)
    before = host_state()
    p = subprocess.Popen(identity.wrap([seam_bin, "release", f"audit.file={log}", *extra]),
                         env=identity.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        first = p.stdout.readline().split()
        assert first[:1] == ["prepared"], (first, p.stderr.read() if p.poll() is not None else "")
        run_id, children = first[1], int(first[2])
        assert children >= 1           # the boundary, waiting at the seam
        out, err = p.communicate("go\n", timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert out.strip() == "released 0", out
    assert not new_leftovers(before), "a released run left state on the host"
    # Nothing of the run in the log: it never started.
    assert run_id not in log.read_text()


def test_embedding_example_runs(identity, hosttmp):
    """examples/embed.c: a 30-line program on libcordon.so runs python3 in a sandbox."""
    for f in ("embed", "libcordon.so.0"):
        shutil.copy2(BUILD / f, hosttmp / f)
        os.chmod(hosttmp / f, 0o755)
    r = subprocess.run(identity.wrap([str(hosttmp / "embed")]),
                       env=identity.env({"LD_LIBRARY_PATH": str(hosttmp)}),
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert (r.returncode, r.stdout) == (0, "exited: exit 0, said 2\n"), r
