"""
Deciders for the failure paths of the runtime decider (src/common/decider.h):
one in the test's own process that is slow or answers garbage, and a process
that dies on its first question. The well-behaved one is examples/decider.py.
"""

import json
import os
import subprocess


class ThreadDecider:
    """A decider in this process for the failure paths: MODE slow, wrong_id, garbage, or
    duplicate (a deny and an allow under one key: ambiguous, so refused)."""

    def __init__(self, path, mode, delay=3.0):
        import socket as s
        import threading
        self.path, self.mode, self.delay = str(path), mode, delay
        self.srv = s.socket(s.AF_UNIX, s.SOCK_STREAM)
        self.srv.bind(self.path)
        os.chmod(self.path, 0o777)
        self.srv.listen(8)
        self.questions = []
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        import time
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with c:
                data = b""
                while b"\n" not in data:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                try:
                    q = json.loads(data.split(b"\n")[0])
                except ValueError:
                    continue  # a client gone before its question (a run that ended)
                self.questions.append(q)
                try:
                    if self.mode == "slow":
                        time.sleep(self.delay)
                        c.sendall(json.dumps({"id": q["id"], "decision": "allow_once"}).encode()
                                  + b"\n")
                    elif self.mode == "wrong_id":
                        c.sendall(b'{"id": "0", "decision": "allow_session"}\n')
                    elif self.mode == "garbage":
                        c.sendall(b"allow!\n")
                    elif self.mode == "duplicate":
                        c.sendall(b'{"id": "%s", "decision": "deny", "decision": "allow_once"}\n'
                                  % q["id"].encode())
                except OSError:
                    pass

    def close(self):
        self.srv.close()


def crashing_decider(path):
    """A decider process that dies on reading its first question."""
    code = ("import os,socket;s=socket.socket(socket.AF_UNIX);s.bind(%r);os.chmod(%r,0o777);"
            "s.listen(1);print('up',flush=True);c,_=s.accept();c.recv(4096);os._exit(3)"
            % (str(path), str(path)))
    p = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE)
    assert p.stdout.readline() == b"up\n"
    return p


def stop_decider(dec):
    """End what a test started as its decider: a ThreadDecider, a process, or None."""
    if isinstance(dec, ThreadDecider):
        dec.close()
    elif dec:
        dec.kill()
        dec.wait()
