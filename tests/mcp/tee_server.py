#!/usr/bin/python3
"""Run an MCP stdio server, logging every line it is sent.

    tee_server.py [--log FILE] [--] COMMAND [ARG...]

Each line read from stdin is appended to FILE (default: $MCP_TEE_LOG) and
flushed there BEFORE it is passed on to COMMAND's stdin, so once the server
has answered a message, that message is in the log; a message missing from
the log never reached the server. The server's stdout and stderr are its own
(inherited), so replies do not pass through this wrapper. SIGTERM, SIGINT
and SIGHUP are passed on to the server (and SIGKILL reaches it too: the
server is set to die with the wrapper); when stdin ends, the server's stdin
is closed; when the server exits, so does this wrapper, with the server's
status (128+N if signal N killed it). The wrapper lets go of stdout, so the
client sees end-of-file when the server exits.

Python 3 standard library only, for use inside the sandbox: point the log at
/workspace or another directory bound read-write.
"""

import os
import signal
import subprocess
import sys
import threading


def usage():
    sys.stderr.write("usage: tee_server.py [--log FILE] [--] COMMAND [ARG...]\n")
    return 2


def die_with_parent():
    """In the child: SIGKILL it when the wrapper dies, even by SIGKILL."""
    try:
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def main(argv):
    log_path = os.environ.get("MCP_TEE_LOG")
    while argv and argv[0].startswith("--"):
        if argv[0] == "--":
            argv = argv[1:]
            break
        if argv[0] == "--log" and len(argv) > 1:
            log_path, argv = argv[1], argv[2:]
        elif argv[0].startswith("--log="):
            log_path, argv = argv[0][len("--log="):], argv[1:]
        else:
            return usage()
    if not argv or not log_path:
        return usage()

    log = open(log_path, "ab", buffering=0)
    try:
        child = subprocess.Popen(argv, stdin=subprocess.PIPE, bufsize=0,
                                 preexec_fn=die_with_parent)
    except OSError as e:
        sys.stderr.write("tee_server.py: cannot run %s: %s\n" % (argv[0], e))
        return 127

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)

    # Only the server may hold the client's end of stdout, so that the
    # client sees end-of-file as soon as the server exits.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)

    def reap():
        code = child.wait()
        os._exit(code if code >= 0 else 128 - code)

    watcher = threading.Thread(target=reap, daemon=True)
    watcher.start()

    stdin = sys.stdin.buffer
    try:
        while True:
            line = stdin.readline()
            if not line:
                break
            log.write(line)  # unbuffered: in the file before the server has it
            try:
                child.stdin.write(line)
            except (BrokenPipeError, OSError):
                break  # the server stopped reading (it exited)
    finally:
        try:
            child.stdin.close()
        except OSError:
            pass
    watcher.join()  # it ends the process with the server's status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
