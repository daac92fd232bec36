"""
A level fallback is never silent: with `--level A,B` where A cannot run on
this host, the run at B says on stderr, in one line, that A was skipped and
why (unless --quiet), and the result and the audit's run.start and run.end
carry the same reason. A is made unavailable the way a host would lack it:
the microvm level's QEMU is named at a path where there is none
(CORDON_QEMU), which every machine refuses the same way, KVM or not.
"""

import json

import pytest

from conftest import Cordon

NO_QEMU = {"CORDON_QEMU": "/nonexistent/qemu-system-x86_64"}
WHY = "no QEMU at '/nonexistent/qemu-system-x86_64'"


@pytest.fixture(params=["namespace", "process"])
def fallback(request, identity, bins, hosttmp):
    """cordon as each identity, and the level the fallback lands on."""
    return Cordon(identity, bins, hosttmp, request.param), request.param


def events(log, type_):
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == type_]


def test_fallback_says_why(fallback):
    c, to = fallback
    log = c.hostdir("audit", mode=0o700) / "audit.jsonl"
    r = c.run(["sh", "-c", "echo ran"], "--level", f"microvm,{to}", "--audit", log, env=NO_QEMU,
              bind_probe=False)
    assert r.status == 0 and r.out == "ran\n", r
    # one notice line, naming the level passed over, why, and the level that ran (an
    # ordinary user's run may have one more: its limits held by rlimits, not a cgroup)
    lines = [l for l in r.err.splitlines() if "per process only" not in l]
    assert lines == [f"cordon: level microvm skipped: {WHY}: No such file or directory; "
                     f"running at {to}"], r
    skipped = [{"level": "microvm",
                "reason": f"{WHY}: No such file or directory"}]
    assert r.result["level"] == to and r.result["levels_skipped"] == skipped, r
    [start] = events(log, "run.start")
    [end] = events(log, "run.end")
    assert start["level"] == to and start["levels_skipped"] == skipped, start
    assert end["levels_skipped"] == skipped, end


def test_fallback_quiet(fallback):
    c, to = fallback
    r = c.run(["true"], "--level", f"microvm,{to}", "--quiet", env=NO_QEMU, bind_probe=False)
    assert r.status == 0 and r.err == "", r
    # --quiet silences the terminal, not the record
    assert r.result["levels_skipped"][0]["level"] == "microvm", r


def test_first_level_runs_nothing_said(fallback):
    c, to = fallback
    r = c.run(["true"], "--level", f"{to},microvm", env=NO_QEMU, bind_probe=False)
    assert r.status == 0 and "skipped" not in r.err, r
    assert r.result["level"] == to and "levels_skipped" not in r.result, r


def test_every_level_refused_names_each(fallback):
    c, _ = fallback
    # an overlay workspace, which only the namespace level runs: neither level of the
    # list can run, and nothing is skipped
    ws = c.hostdir("ws")
    r = c.run(["true"], "--level", "microvm,gvisor", "-w", ws, "--workspace-mode", "overlay",
              env=NO_QEMU, bind_probe=False)
    assert r.status == 125 and "skipped" not in r.err, r
    assert r.err.count("\n") == 1 and WHY in r.err and "gvisor: workspace.mode" in r.err, r
    assert "levels_skipped" not in r.result, r
