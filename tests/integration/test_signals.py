"""
Signals sent to cordon reach the command through the sandbox's init: the
first SIGINT/SIGTERM/SIGHUP is passed on so the command can clean up; one
that ignores it is killed after the grace period, or at a second signal.
"""

import signal
import time

import pytest

from conftest import PROBE, marker, probe_pids
from test_limits import assert_gone

# The command handles the signal, leaves proof in the workspace and exits 0.
# Its handler is installed before it says "ready", and python runs it
# whenever the signal comes (even mid-wait): nothing here depends on timing.
TRAP = ("import signal, subprocess, sys\n"
        "def bye(*_):\n    open('cleaned', 'w').write('cleaned\\n')\n    sys.exit(0)\n"
        "signal.signal(signal.SIG{sig}, bye)\n"
        "child = subprocess.Popen(['{probe}', 'sleep', '1000', '{m}'])\n"
        "print('ready', flush=True)\nchild.wait()\n"
        # the child may die of the same signal first: the handler still runs
        "signal.pause()\n")

# The command and a child in its process group block the signal before
# "ready" and take it with sigwait (a handler can miss a signal that lands
# just before a sleep starts); the child's line comes first, then the
# command exits 7.
GROUP_TRAP = ("import os, signal, sys\n"
              "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
              "child = os.fork()\n"
              "if child == 0:\n"
              "    signal.sigwait({signal.SIGTERM})\n"
              "    print('child got term', flush=True)\n"
              "    os._exit(0)\n"
              "print('ready', flush=True)\n"
              "signal.sigwait({signal.SIGTERM})\n"
              "os.waitpid(child, 0)\n"
              "print('got term', flush=True)\n"
              "sys.exit(7)\n")


def started(p):
    """Wait for the command's "ready" line on its stdout."""
    line = p.stdout.readline()
    return line.strip() == b"ready"


@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "TERM"), (signal.SIGINT, "INT"),
                                      (signal.SIGHUP, "HUP")], ids=["TERM", "INT", "HUP"])
def test_signal_is_passed_on_for_cleanup(cordon, sig, name):
    ws = cordon.hostdir()
    m = marker()
    p = cordon.popen(["python3", "-c", TRAP.format(sig=name, m=m, probe=PROBE)], "-w", ws)
    try:
        assert started(p), p.stderr.read()
        p.send_signal(sig)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read().decode(errors="replace")
    # The command cleaned up in its own handler: proof left in the workspace.
    assert (ws / "cleaned").read_text() == "cleaned\n", err
    # It handled the signal and exited: its status is cordon's, not the signal's.
    assert p.returncode == 0, err
    assert "run ended" not in err, err
    assert_gone(m)


def test_signal_reaches_the_commands_process_group(cordon):
    """As a terminal's ^C reaches every stage of a pipeline: the command's
    whole process group is signalled, at every level."""
    p = cordon.popen(["python3", "-c", GROUP_TRAP])
    try:
        assert started(p), p.stderr.read()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert out == b"child got term\ngot term\n", (out, err)
    assert p.returncode == 7, (out, err)
    assert b"run ended" not in err, err


def test_ignored_signal_is_followed_by_kill_after_grace(cordon):
    m = marker()
    p = cordon.popen(["sh", "-c", f'trap "" TERM INT HUP; echo ready; exec {PROBE} sleep 1000 {m}'])
    try:
        assert started(p)
        assert probe_pids(m), "run never started"
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=15)
        waited = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM
    # Not at once (the grace period), and not never.
    assert waited >= 1.0, waited
    assert_gone(m)


def test_second_signal_kills_at_once(cordon):
    m = marker()
    p = cordon.popen(["sh", "-c", f'trap "" TERM INT; echo ready; exec {PROBE} sleep 1000 {m}'])
    try:
        assert started(p)
        assert probe_pids(m), "run never started"
        p.send_signal(signal.SIGINT)
        time.sleep(0.2)  # let the first one be passed on and ignored
        p.send_signal(signal.SIGINT)
        p.wait(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGINT
    assert_gone(m)
