"""
kubernetes-sigs/agent-sandbox's in-pod API (sandboxd) served by `cordon
serve --sandboxd-grpc --sandboxd-rest` (issue 26, item 5): a real daemon,
a real gRPC client (grpcio with protoc's classes from proto/), plain HTTP for
the files. Every Start and Execute is a fresh sandbox on the workspace. The
hostile side: another uid's process numbers, a uid the daemon does not
serve, malformed and oversized messages, traversal, links and FIFOs planted
in the workspace, a client that goes away. Every test ends with the autouse
check that no cgroup or temp entry of its runs is left.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import NOBODY, marker, pids_with, wait_until
from sandboxd_client import Client, generate
from serve_util import Daemon
from test_transactions_crash import listing

OTHER = 65533     # allowed by --allow-uid
STRANGER = 65532  # not allowed
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def pb_dir():
    # Readable by the other uids the tests call as (pytest's own temp is 0700).
    d = tempfile.mkdtemp(prefix="sandboxd-pb-")  # not "cordon*": the leftover check's
    generate(d)
    yield d
    shutil.rmtree(d)


class Sandboxd:
    def __init__(self, cordon, pb_dir, *opts, env=None):
        self.ws = cordon.hostdir()
        self.d = Daemon(cordon, *cordon.level_opts(), "--pool", "0", "--workspace", self.ws,
                        "--sandboxd-grpc", "127.0.0.1:0", "--sandboxd-rest", "127.0.0.1:0",
                        *opts, env=env)
        c = self.d.connect()
        addrs = c.result("health")["sandboxd"]
        c.close()
        self.grpc, self.rest = addrs["grpc"], addrs["rest"]
        self.pb_dir = pb_dir
        self.client = Client(pb_dir, self.grpc)

    def http(self, method, path, body=None, headers=None):
        host, port = self.rest.rsplit(":", 1)
        h = http.client.HTTPConnection(host, int(port), timeout=60)
        h.request(method, path, body=body, headers=headers or {})
        r = h.getresponse()
        data = r.read()
        h.close()
        return r.status, dict(r.getheaders()), data

    def as_uid(self, uid, method, *args):
        """A gRPC call made by another uid's process: [status name, detail]."""
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            "/usr/bin/python3", os.path.join(HERE, "sandboxd_client.py"),
                            self.pb_dir, self.grpc, method, json.dumps(list(args))],
                           capture_output=True, timeout=120, cwd="/")
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        return json.loads(r.stdout)

    def stop(self):
        self.client.close()
        if self.d.proc.poll() is None:
            return self.d.stop(signal.SIGTERM)


@pytest.fixture
def sandboxd(cordon, pb_dir):
    made = []

    def make(*opts, **kw):
        s = Sandboxd(cordon, pb_dir, *opts, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        stopped = s.stop()
        if stopped:  # a clean drain: exit 0, nothing on stderr (a sanitizer's report included)
            assert stopped == (0, ""), stopped


class Stream:
    """A Start call read on a thread of its own: its events as they come."""

    def __init__(self, call):
        self.call = call
        self.events = []
        self.error = None
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        try:
            for ev in self.call:
                self.events.append(ev)
        except Exception as e:  # the status of a call that did not end OK
            self.error = e

    def pid(self, timeout=120):
        assert wait_until(lambda: self.events or self.error, timeout), "no init event"
        assert self.events and self.events[0].WhichOneof("event") == "init", (self.events,
                                                                              self.error)
        return self.events[0].init.process_id

    def output(self):
        return b"".join(e.stdout + e.stderr for e in self.events)

    def until(self, text, timeout=120):
        ok = wait_until(lambda: text.encode() in self.output() or self.error, timeout)
        assert ok and text.encode() in self.output(), (text, self.output()[-500:], self.error)

    def exit_code(self, timeout=120):
        self.t.join(timeout)
        assert not self.t.is_alive(), "the stream did not end"
        assert self.error is None, self.error
        kinds = [e.WhichOneof("event") for e in self.events]
        assert kinds[0] == "init" and kinds[-1] == "exit" and kinds.count("exit") == 1, kinds
        return self.events[-1].exit.exit_code


def code_of(call):
    with pytest.raises(Exception) as e:
        call()
    return e.value.code().name


def test_execute_and_start_round_trips(sandboxd, cordon):
    """Execute answers output, errors and the exit code at once; Start
    streams init, output and exit; env_vars and cwd (relative, or absolute
    in /workspace) apply; a file one call writes the next one reads; the
    audit log has each process's start and end."""
    audit = cordon.hostdir() / "audit.jsonl"
    s = sandboxd("--audit", audit)
    c = s.client
    # The process level has no mounts of its own: the workspace is where the host has it.
    ws = str(s.ws) if cordon.level == "process" else "/workspace"
    r = c.execute(["sh", "-c", "echo out; echo err >&2; echo $GREETING; pwd; exit 7"],
                  env={"GREETING": "hello"})
    assert (r.exit_code, r.stdout, r.stderr) == (7, f"out\nhello\n{ws}\n".encode(), b"err\n")
    (s.ws / "sub").mkdir()
    os.chown(s.ws / "sub", os.stat(s.ws).st_uid, os.stat(s.ws).st_gid)
    for cwd in ("sub", "/workspace/sub", "./sub/"):
        assert c.execute(["pwd"], cwd=cwd).stdout == f"{ws}/sub\n".encode(), cwd
    assert c.execute(["sh", "-c", "echo kept > note"]).exit_code == 0
    assert (s.ws / "note").read_text() == "kept\n"
    st = Stream(c.start(["sh", "-c", "cat note; echo two >&2; kill -TERM $$"]))
    assert st.exit_code() == 128 + signal.SIGTERM
    assert b"".join(e.stdout for e in st.events) == b"kept\n"
    assert b"".join(e.stderr for e in st.events) == b"two\n"
    # A program that is not there: a shell's 127, and why on stderr.
    r = c.execute(["/no/such/program"])
    assert r.exit_code == 127 and b"No such file" in r.stderr, r
    # A working directory that is not there is named as such, not as the program.
    r = c.execute(["pwd"], cwd="absent")
    assert r.exit_code == 127 and b"working directory" in r.stderr, r
    assert b"cannot run" not in r.stderr, r
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    starts = [e for e in events if e.get("type") == "process.start"]
    ends = [e for e in events if e.get("type") == "process.end"]
    assert len(starts) == len(ends) == 8, [e.get("type") for e in events]
    assert starts[0]["argv"][:2] == ["sh", "-c"] and starts[0]["uid"] == 0, starts[0]


def test_a_terminal_repl_resize_and_interrupt(sandboxd):
    """A Python REPL through a PTY answers 2+2; stty size follows a resize;
    ^C interrupts a sleep in a shell, which lives on; SendSignal's SIGINT
    ends a sleep."""
    s = sandboxd()
    c = s.client
    py = Stream(c.start(["python3", "-q", "-i"], pty=(80, 24)))
    pid = py.pid()
    c.write(pid, b"2+2\n")
    py.until("4\r\n")
    c.write(pid, b"exit()\n")
    assert py.exit_code() == 0
    sh = Stream(c.start(["sh"], pty=(80, 24)))
    pid = sh.pid()
    c.write(pid, b"stty size\n")
    sh.until("24 80")
    c.resize(pid, 132, 50)
    c.write(pid, b"stty size\n")
    sh.until("50 132")
    # ^C through the terminal's line discipline (an interactive shell drops the
    # rest of the line it interrupted: the status is asked after).
    c.write(pid, b"sleep 600\n")
    time.sleep(0.5)
    c.write(pid, b"\x03")
    c.write(pid, b"echo status=$?\n")
    sh.until("status=130")
    c.write(pid, b"exit 3\n")
    assert sh.exit_code() == 3
    # SendSignal: to the process group of a process without a terminal.
    sleeper = Stream(c.start(["sleep", "600"]))
    c.signal(sleeper.pid(), 2)
    assert sleeper.exit_code() == 128 + signal.SIGINT


def test_stdin_eof_and_what_is_refused(sandboxd):
    """stdin and its EOF reach a process; after its end, stdin and signals
    are refused; a process without a terminal cannot be resized; numbers
    that were never given are not found; bad requests are named."""
    s = sandboxd()
    c = s.client
    st = Stream(c.start(["sh", "-c", "cat; echo done"]))
    pid = st.pid()
    assert code_of(lambda: c.resize(pid, 10, 10)) == "FAILED_PRECONDITION"
    c.write(pid, b"hello\n")
    c.write(pid, eof=True)
    assert st.exit_code() == 0
    assert st.output() == b"hello\ndone\n"
    assert code_of(lambda: c.write(pid, b"late")) == "FAILED_PRECONDITION"
    assert code_of(lambda: c.signal(pid, 9)) == "FAILED_PRECONDITION"
    for never in (0, 99999, -1):
        assert code_of(lambda: c.signal(never, 9)) == "NOT_FOUND", never
    assert code_of(lambda: c.signal(pid + 1000, 9)) == "NOT_FOUND"
    # A cwd out of /workspace is refused before anything runs.
    for cwd in ("/etc", "..", "sub/../../etc", "/workspace/../etc", "/workspacex"):
        assert code_of(lambda: c.execute(["true"], cwd=cwd)) == "PERMISSION_DENIED", cwd
    assert code_of(lambda: c.execute([])) == "INVALID_ARGUMENT"
    assert code_of(lambda: c.execute(["true"], env={"A=B": "x"})) == "INVALID_ARGUMENT"
    assert code_of(lambda: c.signal(pid, 11)) in ("INVALID_ARGUMENT", "FAILED_PRECONDITION")


def test_hostile_messages_get_a_status_not_a_crash(sandboxd):
    """Malformed protobuf, a truncated varint, an unknown method, a
    message over the limit and an empty request each get their status; the
    daemon then still serves."""
    s = sandboxd()
    c = s.client
    for bad in (b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05ab", b"\x08", b"\xff\xff\xff",
                b"\x0a\x02\x0a\x00\x0a", b"\x0f"):
        for method in ("Execute", "WriteStdin", "SendSignal", "ResizeTTY"):
            assert code_of(lambda: c.raw(method, bad)) == "INVALID_ARGUMENT", (method, bad)
    assert code_of(lambda: c.raw("Start", b"", stream=True)) == "INVALID_ARGUMENT"
    # A program named "", and a command word that is not UTF-8 (proto3's strings are).
    for bad in (b"\x0a\x02\x0a\x00", b"\x0a\x03\x0a\x01\xff", b"\x0a\x05\x0a\x03\xed\xa0\x80"):
        assert code_of(lambda: c.raw("Execute", bad)) == "INVALID_ARGUMENT", bad
    assert code_of(lambda: c.raw("Nope", b"")) == "UNIMPLEMENTED"
    big = b"\x0a" + b"\x80\x80\x80\x03" + b"x" * (6 << 20)
    assert code_of(lambda: c.raw("Execute", big)) == "RESOURCE_EXHAUSTED"
    # Not gRPC at all: plain HTTP/1.1 on the gRPC port gets the connection closed.
    host, port = s.grpc.rsplit(":", 1)
    h = http.client.HTTPConnection(host, int(port), timeout=30)
    with pytest.raises((http.client.HTTPException, OSError)):
        h.request("GET", "/")
        h.getresponse().read()
    h.close()
    assert c.execute(["echo", "alive"]).stdout == b"alive\n"


def test_processes_belong_to_their_starter(sandboxd):
    """A process root started is not found by another allowed uid, whatever
    it asks; a uid the daemon does not serve is refused at connect and
    starts nothing."""
    if os.geteuid() != 0:
        pytest.skip("needs root to call as other uids")
    s = sandboxd("--allow-uid", str(OTHER))
    word = marker()
    st = Stream(s.client.start(["sh", "-c", f"read x; echo got:$x; echo {word} > /dev/null"]))
    pid = st.pid()
    for method, args in (("write", [pid, "cHduZWQ="]), ("signal", [pid, 9]),
                         ("resize", [pid, 9, 9])):
        assert s.as_uid(OTHER, method, *args)[0] == "NOT_FOUND", method
    code, detail = s.as_uid(STRANGER, "execute", ["sh", "-c", f"echo {word} > stranger"])
    assert code == "UNAVAILABLE", (code, detail)
    code, detail = s.as_uid(OTHER, "execute", ["sh", "-c", "echo $((6*7))"])
    assert code == "OK" and "42" in detail, detail
    s.client.write(pid, b"mine\n")
    st.until("got:mine")
    assert st.exit_code() == 0
    assert not (s.ws / "stranger").exists()


def listed(s, num):
    """The daemon's record of the process numbered NUM (process.list, as root)."""
    c = s.d.connect()
    try:
        return next(p for p in c.result("process.list")["processes"] if p["num"] == num)
    finally:
        c.close()


def test_a_call_whose_client_goes_away_kills_its_process(sandboxd, cordon):
    """A Start whose client cancels has its process killed, recorded as such,
    and none is left on the host; one that floods a client that never reads
    is held back, not buffered, until the client goes too."""
    s = sandboxd()
    word = marker()
    call = s.client.start(["sh", "-c", f"sleep 1000; echo {word}"])
    pid = Stream(call).pid()
    host_pids = cordon.level in ("namespace", "process")  # gVisor's are its own
    assert not host_pids or wait_until(lambda: pids_with(word), 60)
    call.cancel()
    assert wait_until(lambda: listed(s, pid)["state"] == "exited", 60), listed(s, pid)
    assert listed(s, pid)["reason"] == "killed", listed(s, pid)
    assert not host_pids or wait_until(lambda: not pids_with(word), 60), pids_with(word)
    flood = s.client.start(["sh", "-c", "yes flood"])
    first = next(flood)
    assert first.WhichOneof("event") == "init"
    next(flood)  # some output came, then nobody reads
    time.sleep(2)
    held = listed(s, first.init.process_id)
    # Unread output waits in the daemon up to 256 KiB (and gRPC's windows): not gigabytes.
    assert held["state"] == "running" and held["output_bytes"] < (64 << 20), held
    flood.cancel()
    assert wait_until(lambda: listed(s, first.init.process_id)["state"] == "exited", 60)
    assert s.client.execute(["echo", "ok"]).stdout == b"ok\n"


def test_files_round_trip(sandboxd):
    """PUT (raw, multipart, a mode) makes parents and replaces atomically;
    GET reads bytes or lists a directory; HEAD probes; DELETE removes, a
    non-empty directory only with recursive=true; a file written over REST
    is read by a sandboxed run and the other way round; health; metadata
    shows SANDBOX_ variables but never a credential's."""
    s = sandboxd(env={"SANDBOX_ID": "pod-7", "SANDBOX_API_TOKEN": "secret", "OTHER_X": "1",
                      "SANDBOX_DB_PASSWD": "secret", "SANDBOX_AUTH_HEADER": "secret"})
    assert s.http("PUT", "/v1/files/src/main.py?mode=0755", b"print(6*7)\n")[0] == 204
    assert (s.ws / "src" / "main.py").read_bytes() == b"print(6*7)\n"
    assert oct((s.ws / "src" / "main.py").stat().st_mode & 0o777) == "0o755"
    assert s.client.execute(["python3", "src/main.py"]).stdout == b"42\n"
    s.client.execute(["sh", "-c", "printf 'from the run' > src/out.txt"])
    code, headers, body = s.http("GET", "/v1/files/src/out.txt")
    assert (code, body) == (200, b"from the run")
    assert headers["Content-Type"] == "application/octet-stream"
    code, headers, body = s.http("HEAD", "/v1/files/src/out.txt")
    assert (code, body, headers.get("Content-Length")) == (200, b"", "12")
    code, _, body = s.http("GET", "/v1/files/src")
    listing = json.loads(body)
    assert code == 200 and listing["path"] == "/src"
    names = {e["name"]: e for e in listing["entries"]}
    assert set(names) == {"main.py", "out.txt"} and names["main.py"]["mode"] == "0755"
    assert names["out.txt"]["type"] == "file" and names["out.txt"]["size"] == 12
    assert json.loads(s.http("GET", "/v1/files/")[2])["path"] == "/"
    # A part whose filename (not name) is "file" is not the file.
    mp = (b"--XyZ\r\nContent-Disposition: form-data; filename=\"file\"; name=\"other\""
          b"\r\n\r\nnope\r\n"
          b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n"
          b"Content-Type: application/octet-stream\r\n\r\nmulti\r\npart\r\n--XyZ--\r\n")
    assert s.http("PUT", "/v1/files/mp.bin", mp,
                  {"Content-Type": "multipart/form-data; boundary=XyZ"})[0] == 204
    assert (s.ws / "mp.bin").read_bytes() == b"multi\r\npart"
    assert s.http("PUT", "/v1/files/x?mode=777", b"")[0] == 400
    assert s.http("PUT", "/v1/files/src", b"x")[0] == 400
    assert s.http("GET", "/v1/files/missing")[0] == 404
    assert s.http("DELETE", "/v1/files/src")[0] == 409
    assert s.http("DELETE", "/v1/files/src?recursive=maybe")[0] == 400
    assert s.http("DELETE", "/v1/files/src?recursive=true")[0] == 204
    assert not (s.ws / "src").exists() and s.http("DELETE", "/v1/files/src")[0] == 404
    assert s.http("DELETE", "/v1/files/")[0] == 409
    assert s.http("DELETE", "/v1/files/?recursive=true")[0] == 204
    assert s.ws.is_dir() and list(s.ws.iterdir()) == []
    code, _, body = s.http("GET", "/v1/health")
    assert code == 200 and json.loads(body)["status"] == "ok"
    assert json.loads(s.http("GET", "/v1/metadata")[2]) == {"env": {"SANDBOX_ID": "pod-7"}}
    assert s.http("GET", "/v2/anything")[0] == 404


def test_files_refuse_traversal_links_and_fifos(sandboxd, cordon):
    """"..", encoded or not, a link a run planted (to a host file, to /, to a
    directory in the workspace) and a FIFO are refused with 403, and the
    host shows no trace: the link's target unchanged, nothing written
    outside. A uid the daemon does not serve is cut before it can send a
    body, and writes nothing."""
    s = sandboxd()
    outside = cordon.hostdir() / "outside.txt"
    outside.write_text("host\n")
    os.chmod(outside, 0o666)
    r = s.client.execute(["sh", "-c", f"ln -s {outside} link; mkdir d && ln -s d dlink"])
    assert r.exit_code == 0, r
    # cordon removes a run's links out of the workspace after it; the pod's other
    # container (which shares the volume) can still plant them, and FIFOs.
    assert wait_until(lambda: not os.path.lexists(s.ws / "link"), 60)  # after the run's end
    os.symlink(outside, s.ws / "link")
    os.symlink("/", s.ws / "root")
    os.mkfifo(s.ws / "fifo")
    for path in ("/v1/files/..", "/v1/files/../outside.txt", "/v1/files/%2e%2e/outside.txt",
                 "/v1/files/d/..%2F..%2Foutside.txt"):
        for method in ("GET", "PUT", "DELETE"):
            assert s.http(method, path, b"pwned")[0] == 403, (method, path)
    for path in ("link", "root/etc/passwd", "dlink/x", "fifo"):
        for method in ("GET", "HEAD", "PUT"):
            code = s.http(method, f"/v1/files/{path}", b"pwned")[0]
            if method == "PUT" and path in ("link", "fifo"):
                assert code == 204, (method, path)  # the name replaced, never written through
            else:
                assert code == 403, (method, path, code)
    assert outside.read_text() == "host\n"
    assert not os.path.exists("/x") and not (s.ws / "d" / "x").exists()
    assert os.path.islink(s.ws / "root") and os.path.islink(s.ws / "dlink")
    assert s.http("GET", "/v1/files/a%00b")[0] == 400
    if os.geteuid() == 0:
        # A uid the daemon does not serve: cut right after the accept, before the
        # server holds its body (64 MiB announced, sent until the socket fails).
        word = marker()
        host, port = s.rest.rsplit(":", 1)
        code = ("import socket, sys\n"
                "s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)\n"
                "s.sendall(b'PUT /v1/files/' + sys.argv[3].encode() + b' HTTP/1.1\\r\\n'\n"
                "          b'Host: x\\r\\nContent-Length: 67108864\\r\\n\\r\\n')\n"
                "sent = 0\n"
                "try:\n"
                "    while sent < 64 << 20:\n"
                "        sent += s.send(b'x' * 65536)\n"
                "    print('all sent', s.recv(100))\n"
                "except OSError as e:\n"
                "    print('cut after', sent)\n")
        r = subprocess.run(["setpriv", f"--reuid={STRANGER}", f"--regid={STRANGER}",
                            "--clear-groups", "/usr/bin/python3", "-c", code, host, port, word],
                           capture_output=True, timeout=120, cwd="/")
        assert r.stdout.startswith(b"cut after"), r
        assert not (s.ws / word).exists()


def test_files_keep_out_of_the_protected_names(sandboxd):
    """The REST files endpoints write the host workspace as a run would, and
    are held to the same protected names: PUT or DELETE of one at the root
    (.envrc, .vscode/...) or of a commit's own anywhere is refused with 403
    and the host shows no change; below the root they are ordinary names."""
    s = sandboxd()
    (s.ws / ".envrc").write_text("use nix\n")
    for path in (".envrc", ".vscode/tasks.json", "sub/.cordon-txn-x"):
        for method in ("PUT", "DELETE"):
            code, _, body = s.http(method, f"/v1/files/{path}", b"planted\n")
            assert code == 403, (method, path, code, body)
            assert b"is a protected name in the workspace" in body, body
    assert sorted(os.listdir(s.ws)) == [".envrc"], os.listdir(s.ws)
    assert (s.ws / ".envrc").read_text() == "use nix\n"
    assert s.http("PUT", "/v1/files/sub/.envrc", b"below\n")[0] == 204
    assert (s.ws / "sub" / ".envrc").read_text() == "below\n"
    assert s.http("GET", "/v1/files/.envrc")[0] == 200


def host_git(ws, *args, cwd):
    """git on the host as the suite's user (root in CI) in CWD of the workspace WS, every
    owner's repository trusted (so the result is git's, not its ownership check's), not
    looking above WS: what a user's prompt or editor runs there later."""
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(ws.parent), "LANG": "C"}
    return subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, env=env,
                          capture_output=True, timeout=120)


def own(cordon, top):
    """TOP and all in it the identity's: a write the daemon refuses is cordon's refusal."""
    for dirpath, dirs, files in os.walk(top):
        for n in [dirpath] + [os.path.join(dirpath, f) for f in dirs + files]:
            os.lchown(n, cordon.ident.uid, cordon.ident.gid)


def refused_for_git(s, method, path, body=b"x"):
    code, _, text = s.http(method, f"/v1/files/{path}", body)
    assert code == 403 and b"protected in the workspace: git on the host" in text, \
        (method, path, code, text)
    return text.decode()


def test_files_keep_out_of_the_repositories(sandboxd, cordon):
    """No scan follows a REST write as one follows a run (gitscan), so the
    files endpoints touch no repository of the workspace: a PUT or DELETE
    in a .git at any depth (a hook, config with core.fsmonitor, info/
    attributes, a nested repository's, a gitdir pointer file, the .git
    itself, .GIT) is refused with 403, and the host shows no trace: the
    tree unchanged, and a host `git status` runs no planted command, where
    the same config written into a copy of the repository does run it.
    GET still reads there."""
    s = sandboxd()
    assert host_git(s.ws, "init", "-q", cwd=s.ws).returncode == 0
    assert host_git(s.ws, "init", "-q", "sub", cwd=s.ws).returncode == 0
    (s.ws / "sub" / "file").write_text("keep\n")
    (s.ws / "wt").mkdir()
    (s.ws / "wt" / ".git").write_text("gitdir: ../.git\n")  # a gitdir pointer
    own(cordon, s.ws)
    mark = cordon.hostdir() / "pwned"
    evil = f'[core]\n\tfsmonitor = "touch {mark}; true"\n'.encode()
    hook = b"#!/bin/sh\ntouch " + str(mark).encode() + b"\n"
    before = listing(s.ws)
    for path, body in ((".git/hooks/pre-commit?mode=0755", hook), (".git/config", evil),
                       (".git/config.worktree", evil), (".git/info/attributes", b"* filter=x\n"),
                       (".git/modules/m/config", evil), ("sub/.git/config", evil),
                       ("sub/.git/hooks/post-checkout?mode=0755", hook),
                       ("wt/.git", b"gitdir: /elsewhere\n"), (".GIT/config", evil),
                       (".git./config", evil), ("sub/.Git/hooks/pre-commit", hook)):
        refused_for_git(s, "PUT", path, body)
    for path in (".git?recursive=true", ".git/hooks/pre-commit.sample", "sub/.git?recursive=true",
                 "sub/.git/HEAD", "wt/.git"):
        refused_for_git(s, "DELETE", path)
    text = refused_for_git(s, "DELETE", "sub?recursive=true")
    assert "cannot remove 'sub' whole: 'sub/.git' is a repository's .git" in text, text
    assert "nothing removed" in text, text
    assert listing(s.ws) == before
    code, _, body = s.http("GET", "/v1/files/.git/HEAD")
    assert code == 200 and body.startswith(b"ref: refs/heads/"), (code, body)
    for where in (s.ws, s.ws / "sub"):
        r = host_git(s.ws, "status", "--short", cwd=where)
        assert r.returncode == 0, r
    assert not mark.exists()
    # Not vacuous: the same config in a copy of the repository runs the command.
    scratch = cordon.hostdir() / "copy"
    shutil.copytree(s.ws / ".git", scratch / ".git", symlinks=True)
    with open(scratch / ".git" / "config", "ab") as f:
        f.write(evil)
    assert host_git(scratch, "status", "--short", cwd=scratch).returncode == 0
    assert mark.exists()


def test_files_never_make_a_git_directory(sandboxd, cordon):
    """A directory is a git directory to git when it holds HEAD and objects
    and refs (of any type: git asks access(X_OK)), or HEAD and a commondir:
    a PUT that would make one (step by step, in any order) is refused with
    403, as is a .git file (a gitdir pointer) anywhere; what the steps
    allowed leaves no repository: git finds none, and runs no config
    command, where the same directory completed by hand does run it. A
    repository already there (a bare one, the workspace's root) is out of
    reach as a .git is."""
    s = sandboxd()
    mark = cordon.hostdir() / "pwned"
    ssh = f'[core]\n\tsshCommand = "touch {mark}; false"\n'.encode()
    for path in (".git", "plain/.git", ".GIT", "git~1/config"):
        refused_for_git(s, "PUT", path, b"gitdir: /elsewhere\n")
    assert s.http("PUT", "/v1/files/d/HEAD", b"ref: refs/heads/main\n")[0] == 204
    assert s.http("PUT", "/v1/files/d/objects/info/packs", b"")[0] == 204
    text = refused_for_git(s, "PUT", "d/refs/heads/main", b"0" * 40)
    assert "'d/refs/heads/main' would make 'd' a git directory" in text, text
    assert s.http("PUT", "/v1/files/d/config", ssh)[0] == 204  # d is no repository: inert
    assert s.http("PUT", "/v1/files/e/objects/x", b"")[0] == 204
    assert s.http("PUT", "/v1/files/e/refs/x", b"")[0] == 204
    refused_for_git(s, "PUT", "e/HEAD", b"ref: refs/heads/main\n")
    assert s.http("PUT", "/v1/files/f/HEAD", b"ref: refs/heads/main\n")[0] == 204
    assert s.http("PUT", "/v1/files/f/objects?mode=0755", b"")[0] == 204
    refused_for_git(s, "PUT", "f/refs?mode=0755", b"")  # a file git's access(X_OK) passes
    assert s.http("PUT", "/v1/files/g/HEAD", b"ref: refs/heads/main\n")[0] == 204
    refused_for_git(s, "PUT", "g/commondir", b"../e\n")
    for name in (".git", "plain/.git", ".GIT", "git~1", "d/refs", "e/HEAD", "f/refs",
                 "g/commondir"):
        assert not os.path.lexists(s.ws / name), name
    for d in "defg":
        r = host_git(s.ws, "rev-parse", "--git-dir", cwd=s.ws / d)
        assert r.returncode != 0 and b"not a git repository" in r.stderr, (d, r)
    host_git(s.ws, "ls-remote", "ssh://127.0.0.1:1/x", cwd=s.ws / "d")
    assert not mark.exists()
    # Not vacuous: d completed by hand is a repository whose config runs the command.
    scratch = cordon.hostdir() / "copy"
    shutil.copytree(s.ws / "d", scratch)
    (scratch / "refs").mkdir()
    host_git(s.ws, "ls-remote", "ssh://127.0.0.1:1/x", cwd=scratch)
    assert mark.exists()
    # A bare repository made on the host, then the workspace's root made one.
    assert host_git(s.ws, "init", "-q", "--bare", "b.git", cwd=s.ws).returncode == 0
    own(cordon, s.ws)
    before = listing(s.ws)
    refused_for_git(s, "PUT", "b.git/hooks/post-update?mode=0755", b"#!/bin/sh\n")
    assert "is in a git directory ('b.git')" in refused_for_git(s, "PUT", "b.git/config", ssh)
    refused_for_git(s, "DELETE", "b.git/HEAD")
    assert "'b.git' is a git directory" in refused_for_git(s, "DELETE", "b.git?recursive=true")
    assert listing(s.ws) == before
    (s.ws / "HEAD").write_text("ref: refs/heads/main\n")
    (s.ws / "objects").mkdir()
    (s.ws / "refs").mkdir()
    own(cordon, s.ws)
    before = listing(s.ws)
    assert "git directory ('/')" in refused_for_git(s, "PUT", "d/config", b"")
    assert "root is a git directory" in refused_for_git(s, "DELETE", "?recursive=true")
    assert listing(s.ws) == before


def test_emptying_the_workspace_keeps_what_is_protected(sandboxd, cordon):
    """DELETE of the workspace itself (recursive) removes everything but what
    a DELETE may not: the protected names at the root, a commit's own, a
    .git and a git directory at any depth (with the directories holding
    them), each left as it was."""
    s = sandboxd()
    assert host_git(s.ws, "init", "-q", cwd=s.ws).returncode == 0
    assert host_git(s.ws, "init", "-q", "deep/sub", cwd=s.ws).returncode == 0
    assert host_git(s.ws, "init", "-q", "--bare", "b.git", cwd=s.ws).returncode == 0
    (s.ws / ".envrc").write_text("use nix\n")
    (s.ws / ".vscode").mkdir()
    (s.ws / ".vscode" / "tasks.json").write_text("{}\n")
    (s.ws / ".cordon-txn-x").write_text("journal\n")
    (s.ws / "deep" / "sub" / "main.c").write_text("int main;\n")
    (s.ws / "deep" / "other").mkdir()
    (s.ws / "deep" / "other" / "x").write_text("x\n")
    (s.ws / "top.txt").write_text("top\n")
    own(cordon, s.ws)
    kept = {k: v for k, v in listing(s.ws).items()
            if k.split("/")[0] in (".envrc", ".vscode", ".cordon-txn-x", ".git", "b.git")
            or k.startswith("deep/sub/.git")}
    assert s.http("DELETE", "/v1/files/?recursive=true")[0] == 204
    left = listing(s.ws)
    assert {k: v for k, v in left.items() if k not in ("deep", "deep/sub")} == kept
    assert sorted(os.listdir(s.ws / "deep")) == ["sub"]
    assert sorted(os.listdir(s.ws / "deep" / "sub")) == [".git"]


def test_unsafe_unprotect_gives_git_to_the_files_endpoints(sandboxd, cordon):
    """filesystem.unsafe_unprotect: [.git] takes .git out of the protected
    names for the files endpoints as for a run; the other names stay."""
    pol = cordon.hostdir("pol") / "p.yaml"
    pol.write_text("version: 1\nfilesystem:\n  unsafe_unprotect: [.git]\n")
    os.chmod(pol, 0o644)
    s = sandboxd("-p", str(pol))
    assert s.http("PUT", "/v1/files/.git/config", b"[core]\n")[0] == 204
    assert (s.ws / ".git" / "config").read_text() == "[core]\n"
    assert s.http("PUT", "/v1/files/.envrc", b"x")[0] == 403


def test_a_peer_that_never_reads_is_not_read_either(sandboxd):
    """A gRPC peer that sends PINGs (each answered by the daemon) and never
    reads the answers: the daemon stops reading it once its answers wait,
    instead of queueing them without end (it held 200 MB for 200 MB of
    PINGs); others are served meanwhile, and its connection goes when it
    does."""
    s = sandboxd()
    host, port = s.grpc.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    sock.connect((host, int(port)))

    def frame(kind, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([kind, 0, 0, 0, 0, 0]) + payload

    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, b""))
    pings = frame(6, b"12345678") * 4096
    sent = 0
    sock.settimeout(3)  # a stall this long: the daemon stopped reading (a slow one only passes)
    with pytest.raises(socket.timeout):
        while sent < 256 << 20:
            sock.sendall(pings)
            sent += len(pings)
    assert s.client.execute(["echo", "alive"]).stdout == b"alive\n"
    sock.close()
