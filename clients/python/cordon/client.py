"""The client: one connection, requests and answers matched by id."""

from __future__ import annotations

import base64
import collections
import dataclasses
import itertools
import json
import select
import socket
import threading
import time
from typing import (Any, Callable, Deque, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Set, Tuple, TypeVar, Union)

BUSY = -32002
# A process's output read past on the way to something else is kept up to this many bytes.
OUTPUT_BUFFER = 8 << 20
READ_SIZE = 64 << 10
# The daemon takes at most 256 KiB of stdin at a time (process.write_stdin).
STDIN_PIECE = 64 << 10
# How long a call retries while a live session's sandbox is still starting.
START_WAIT = 120.0

T = TypeVar("T")
PtySpec = Union[bool, Mapping[str, int], Tuple[int, int], None]


def _unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object whose keys are unique: a key given twice is ambiguous (cordon's
    own readers refuse it too), not "the last one wins"."""
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


class CordonError(Exception):
    """The daemon could not be reached or spoke nonsense."""


class RpcError(CordonError):
    """A JSON-RPC error answer: .code, .message and .data as the daemon sent them."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class BusyError(RpcError):
    """The daemon's queue (or this connection's share) is full, or the session is busy
    (committing, discarding, forking, being destroyed): retry later."""


def _error(err: Mapping[str, Any]) -> RpcError:
    cls = BusyError if err.get("code") == BUSY else RpcError
    return cls(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))


def _bytes(text: str, encoding: str) -> bytes:
    return base64.b64decode(text) if encoding == "base64" else text.encode("utf-8")


@dataclasses.dataclass(frozen=True)
class Result:
    """One run's answer; stdout and stderr as bytes, as the command wrote them (capped)."""

    run_id: str
    exit_code: Optional[int]
    signal: Optional[int]
    reason: str
    status: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    pooled: bool
    error: Optional[str]
    times: Dict[str, Any]
    raw: Dict[str, Any]

    @classmethod
    def from_answer(cls, a: Mapping[str, Any]) -> "Result":
        return cls(
            run_id=a["run_id"], exit_code=a.get("exit_code"), signal=a.get("signal"),
            reason=a["reason"], status=a["status"],
            stdout=_bytes(a["stdout"], a["stdout_encoding"]),
            stderr=_bytes(a["stderr"], a["stderr_encoding"]),
            stdout_truncated=a["stdout_truncated"], stderr_truncated=a["stderr_truncated"],
            pooled=a.get("pooled", False), error=a.get("error"), times=a.get("times", {}),
            raw=dict(a))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def transaction(self) -> Optional[Dict[str, Any]]:
        """On an overlay workspace: what the run changed and what became of it."""
        return self.raw.get("transaction")


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Output as it streams: stream is "stdout" or "stderr"."""

    stream: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class ProcessExit:
    """How a process ended: reason is "exited", "start_failed", "output_limit", "killed"..."""

    exit_code: Optional[int]
    signal: Optional[int]
    reason: str
    error: Optional[str]
    output_bytes: int
    raw: Dict[str, Any]

    @classmethod
    def from_answer(cls, a: Mapping[str, Any]) -> "ProcessExit":
        return cls(exit_code=a.get("exit_code"), signal=a.get("signal"),
                   reason=str(a.get("reason", "exited")), error=a.get("error"),
                   output_bytes=int(a.get("output_bytes") or 0), raw=dict(a))

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class _Output:
    """One process's output as this connection received it and nobody has read yet."""

    def __init__(self, limit: int):
        self.chunks: Deque[Chunk] = collections.deque()
        self.buffered = 0
        self.dropped = 0
        self.limit = limit
        self.end: Optional[ProcessExit] = None
        self.claimed = False                 # a Process reads it

    def add(self, chunk: Chunk) -> None:
        self.chunks.append(chunk)
        self.buffered += len(chunk.data)
        while self.buffered > self.limit and len(self.chunks) > 1:
            old = self.chunks.popleft()
            self.buffered -= len(old.data)
            self.dropped += len(old.data)

    def note(self, method: str, params: Mapping[str, Any]) -> None:
        if method == "process.exit":
            self.end = ProcessExit.from_answer(params)
            return
        data = params.get("data")
        self.add(Chunk(str(params.get("stream", "stdout")),
                       data.encode() if isinstance(data, str)
                       else base64.b64decode(params.get("data_base64", ""))))

    def take(self) -> Optional[Chunk]:
        if not self.chunks:
            return None
        c = self.chunks.popleft()
        self.buffered -= len(c.data)
        return c


def _pty(pty: PtySpec) -> Any:
    if pty is None or pty is False:
        return None
    if pty is True:
        return True
    if isinstance(pty, tuple):
        return {"cols": pty[0], "rows": pty[1]}
    return dict(pty)


def _spawn_params(argv: Optional[Sequence[str]], kw: Mapping[str, Any]) -> Dict[str, Any]:
    unknown = set(kw) - {"code", "language", "pty", "env", "cwd", "timeout", "stdin"}
    if unknown:
        raise TypeError(f"spawn() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    p = Client._run_params(argv, kw.get("code"), kw.get("language"), kw.get("stdin"),
                           kw.get("env"), kw.get("timeout"))
    pty = _pty(kw.get("pty"))
    if pty is not None:
        p["pty"] = pty
    if kw.get("cwd") is not None:
        p["cwd"] = kw["cwd"]
    return p


class Client:
    """A connection to `cordon serve` at PATH. Thread-safe: calls may overlap, and one
    thread may read a process's output while another writes to it.

    Output of processes is read from the socket only when someone asks for something
    (an answer, or a process's next chunk): a consumer that reads slowly leaves it in
    the socket, the daemon stops giving the process credit and the process blocks on
    its own output. What must be read past on the way to an answer (another process's
    output, or this one's while waiting for it to end) is kept up to OUTPUT_BUFFER
    bytes per process; beyond that the oldest is dropped and counted (Process.dropped).
    """

    def __init__(self, path: str, timeout: Optional[float] = None,
                 output_buffer: int = OUTPUT_BUFFER):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(str(path))
        except OSError as e:
            self._sock.close()
            raise CordonError(f"cannot connect to the daemon at {path}: {e}") from e
        self._sock.settimeout(timeout)
        self._timeout = timeout
        self._output_buffer = output_buffer
        self._rbuf = bytearray()
        self._ids = itertools.count(1)
        self._cv = threading.Condition()     # guards everything below
        self._reading = False                # one thread reads the socket at a time
        self._broken: Optional[CordonError] = None
        self._send_lock = threading.Lock()
        self._answers: Dict[int, Dict[str, Any]] = {}
        self._abandoned: Set[int] = set()
        self._notes: Dict[int, List[Dict[str, Any]]] = {}
        self._procs: Dict[str, "_Output"] = {}
        self._closed = False

    # -- plumbing --

    def _send(self, method: str, params: Optional[Mapping[str, Any]]) -> int:
        id = next(self._ids)
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        with self._send_lock:
            self._sock.sendall(data)
        return id

    def _recv_lines(self, deadline: Optional[float]) -> List[bytes]:
        """Complete lines from the socket (at least one), waiting until DEADLINE."""
        scan = 0                             # a long answer is searched once, not per recv
        while True:
            last = self._rbuf.rfind(b"\n", scan)
            if last >= 0:
                lines = bytes(self._rbuf[:last]).split(b"\n")
                del self._rbuf[:last + 1]
                return lines
            scan = len(self._rbuf)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError("no answer from the daemon in time")
            if not select.select([self._sock], [], [], left)[0]:
                continue
            chunk = self._sock.recv(READ_SIZE)
            if not chunk:
                raise CordonError("the daemon closed the connection")
            self._rbuf += chunk

    def _file(self, line: bytes) -> None:
        """File one message (called with the condition held)."""
        try:
            msg = json.loads(line, object_pairs_hook=_unique_keys)
        except ValueError as e:
            raise CordonError(f"the daemon sent something not JSON: {line[:200]!r}") from e
        if "method" in msg:
            params = msg.get("params") or {}
            pid = params.get("process_id")
            if msg["method"] in ("process.output", "process.exit") and isinstance(pid, str):
                out = self._output(pid)
                out.note(msg["method"], params)
                if out.end is not None and out.claimed:
                    del self._procs[pid]     # its Process holds it; nothing more comes
            elif isinstance(params.get("id"), int):
                self._notes.setdefault(params["id"], []).append(params)
        elif isinstance(msg.get("id"), int):
            if msg["id"] in self._abandoned:
                self._abandoned.discard(msg["id"])
            else:
                self._answers[msg["id"]] = msg
        elif "error" in msg:
            raise _error(msg["error"])

    def _output(self, pid: str) -> "_Output":
        out = self._procs.get(pid)
        if out is None:
            out = self._procs[pid] = _Output(self._output_buffer)
        return out

    def _until(self, ready: Callable[[], Optional[T]], timeout: Optional[float] = None) -> T:
        """READY()'s first value that is not None, reading the socket as needed; READY
        is called with the condition held. TimeoutError after TIMEOUT seconds."""
        if timeout is None:
            timeout = self._timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                v = ready()
                if v is not None:
                    return v
                if self._broken:
                    raise self._broken
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("no answer from the daemon in time")
                if self._reading:
                    self._cv.wait(left)
                    continue
                self._reading = True
                try:
                    self._cv.release()
                    try:
                        lines = self._recv_lines(deadline)
                    finally:
                        self._cv.acquire()
                    for line in lines:
                        self._file(line)
                except (CordonError, OSError) as e:
                    if not isinstance(e, (TimeoutError, RpcError)):
                        self._broken = e if isinstance(e, CordonError) else CordonError(str(e))
                    raise
                finally:
                    self._reading = False
                    self._cv.notify_all()

    def _wait(self, id: int, notes: bool = False,
              timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """Yield ID's notifications (if NOTES), then its answer last."""
        def ready() -> Optional[Tuple[bool, Any]]:
            if notes and self._notes.get(id):
                return False, self._notes.pop(id)
            if id in self._answers:
                self._notes.pop(id, None)
                return True, self._answers.pop(id)
            return None

        try:
            while True:
                last, got = self._until(ready, timeout)
                if last:
                    yield got
                    return
                yield from got
        except TimeoutError:
            with self._cv:
                if self._answers.pop(id, None) is None:
                    self._abandoned.add(id)
            raise

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None,
             timeout: Optional[float] = None) -> Any:
        """Any method; its result, or RpcError (TimeoutError after TIMEOUT seconds)."""
        id = self._send(method, params)
        ans: Dict[str, Any] = {}
        for ans in self._wait(id, timeout=timeout):
            pass
        if "error" in ans:
            raise _error(ans["error"])
        return ans["result"]

    # -- methods --

    @staticmethod
    def _run_params(argv: Optional[Sequence[str]], code: Optional[str], language: Optional[str],
                    stdin: Union[bytes, str, None], env: Optional[Mapping[str, str]],
                    timeout: Optional[float]) -> Dict[str, Any]:
        p: Dict[str, Any] = {}
        if argv is not None:
            p["argv"] = list(argv)
        if code is not None:
            p["code"], p["language"] = code, language or "python"
        if isinstance(stdin, str):
            p["stdin"] = stdin
        elif stdin is not None:
            p["stdin_base64"] = base64.b64encode(stdin).decode()
        if env:
            p["env"] = dict(env)
        if timeout is not None:
            p["timeout"] = timeout
        return p

    def run(self, argv: Optional[Sequence[str]] = None, *, code: Optional[str] = None,
            language: Optional[str] = None, stdin: Union[bytes, str, None] = None,
            env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None) -> Result:
        """Run ARGV (or CODE in LANGUAGE: python, node, sh) in a fresh sandbox."""
        return Result.from_answer(self.call("run", self._run_params(argv, code, language, stdin,
                                                                    env, timeout)))

    def stream(self, argv: Optional[Sequence[str]] = None, **kw: Any) -> "Stream":
        """Like run(), but iterate over output Chunks as they come; .result after."""
        return Stream(self, "run", self._run_params(argv, kw.get("code"), kw.get("language"),
                                                     kw.get("stdin"), kw.get("env"),
                                                     kw.get("timeout")))

    def spawn(self, argv: Optional[Sequence[str]] = None, **kw: Any) -> "Process":
        """Start ARGV (or code=, language=) in a fresh sandbox of its own and answer at once.
        pty=True (or {"cols": 120, "rows": 40}) gives it a terminal; env=, cwd= (inside
        /workspace), stdin= (written first), timeout= as for run()."""
        return Process(self, self.call("process.start", _spawn_params(argv, kw)))

    def attach(self, process_id: str) -> "Process":
        """A process of this uid's started elsewhere (another connection, a client that
        went away): what it said lately (a bounded replay) and, from now on, its output."""
        ans = self.call("process.attach", {"process_id": process_id})
        with self._cv:
            out = self._procs[process_id] = _Output(self._output_buffer)
            out.dropped = int(ans.get("replay_dropped") or 0)
            for stream in ("stdout", "stderr"):
                data = _bytes(ans.get(f"replay_{stream}", ""),
                              ans.get(f"replay_{stream}_encoding", "utf-8"))
                if data:
                    out.add(Chunk(stream, data))
            if ans.get("state") == "exited":
                out.end = ProcessExit.from_answer(ans)
        return Process(self, ans)

    def processes(self, session_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """This uid's processes (a session's alone with SESSION_ID), running and ended."""
        return self.call("process.list", {"session_id": session_id} if session_id else {})[
            "processes"]

    def create_session(self, live: bool = False, workspace_mode: Optional[str] = None,
                       workspace_commit: Optional[str] = None) -> "Session":
        """A new session. live=True: one long-lived sandbox whose processes share cwd,
        environment, /tmp and background processes between execs, like a terminal."""
        return self.session(workspace_mode, workspace_commit, live=live)

    def health(self) -> Dict[str, Any]:
        return self.call("health")

    def stats(self) -> Dict[str, Any]:
        return self.call("stats")

    def policy_check(self, policy: Optional[str] = None) -> Dict[str, Any]:
        return self.call("policy.check", {"policy": policy} if policy is not None else {})

    def session(self, workspace_mode: Optional[str] = None,
                workspace_commit: Optional[str] = None, live: bool = False) -> "Session":
        """A new session (a workspace kept between runs); use it as a context manager.
        workspace_mode "overlay" runs each exec on a layer, committed per workspace_commit
        ("on_success", "always", or "manual": Session.commit() / Session.discard())."""
        p: Dict[str, Any] = {k: v for k, v in (("workspace_mode", workspace_mode),
                                               ("workspace_commit", workspace_commit))
                             if v is not None}
        if live:
            p["live"] = True
        return Session(self, self.call("session.create", p)["session_id"], live)

    def sessions(self) -> List[Dict[str, Any]]:
        """This uid's own sessions (every uid's for a daemon's --admin-uid): session_id,
        owner, state ("idle", "running", "committing", ...), workspace_mode, pending..."""
        return self.call("session.list")["sessions"]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Stream:
    """Iterating yields Chunks until the run ends; then .result holds its Result."""

    def __init__(self, client: Client, method: str, params: Dict[str, Any]):
        params = dict(params, stream=True)
        self._client = client
        self._id = client._send(method, params)
        self.result: Optional[Result] = None

    def __iter__(self) -> Iterator[Chunk]:
        for msg in self._client._wait(self._id, notes=True):
            if "run_id" in msg and "stream" in msg:
                data = msg.get("data")
                yield Chunk(msg["stream"], data.encode() if data is not None
                            else base64.b64decode(msg["data_base64"]))
            elif "error" in msg:
                raise _error(msg["error"])
            elif "result" in msg:
                self.result = Result.from_answer(msg["result"])


class Session:
    """A long-lived workspace: each exec is a fresh sandbox on the same files."""

    def __init__(self, client: Client, session_id: str, live: bool = False):
        self.client = client
        self.id = session_id
        self.live = live

    def _p(self, **kw: Any) -> Dict[str, Any]:
        return dict(kw, session_id=self.id)

    def exec(self, argv: Optional[Sequence[str]] = None, *, code: Optional[str] = None,
             language: Optional[str] = None, stdin: Union[bytes, str, None] = None,
             env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None) -> Result:
        p = self.client._run_params(argv, code, language, stdin, env, timeout)
        return Result.from_answer(self.client.call("session.exec", self._p(**p)))

    def stream(self, argv: Optional[Sequence[str]] = None, **kw: Any) -> Stream:
        p = self.client._run_params(argv, kw.get("code"), kw.get("language"), kw.get("stdin"),
                                    kw.get("env"), kw.get("timeout"))
        return Stream(self.client, "session.exec", self._p(**p))

    def write_file(self, path: str, content: Union[bytes, str], mode: int = 0o644) -> None:
        if isinstance(content, str):
            self.client.call("session.write_file", self._p(path=path, content=content, mode=mode))
        else:
            self.client.call("session.write_file", self._p(
                path=path, content_base64=base64.b64encode(content).decode(), mode=mode))

    def read_file(self, path: str) -> bytes:
        r = self.client.call("session.read_file", self._p(path=path))
        return _bytes(r["content"], r["encoding"])

    def spawn(self, argv: Optional[Sequence[str]] = None, **kw: Any) -> "Process":
        """As Client.spawn, on this session: in its live sandbox if it is live, else in a
        fresh sandbox on its workspace."""
        return Process(self.client, self.client.call("process.start",
                                                     self._p(**_spawn_params(argv, kw))))

    def processes(self) -> List[Dict[str, Any]]:
        return self.client.processes(self.id)

    def _starting(self, method: str, **kw: Any) -> Dict[str, Any]:
        """METHOD, retried while the live sandbox is still starting (busy, "is starting")."""
        deadline = time.monotonic() + START_WAIT
        while True:
            try:
                return self.client.call(method, self._p(**kw))
            except BusyError as e:
                if "is starting" not in e.message or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def pause(self) -> None:
        """Freeze every process of the live sandbox (cgroup freezer) until resume()."""
        self._starting("session.pause")

    def resume(self) -> None:
        self._starting("session.resume")

    def expose(self, port: int, unix: bool = False) -> Dict[str, Any]:
        """Reach PORT of the live sandbox from the host (the policy's network.expose must
        list it): answers address ("127.0.0.1:PORT"), host, host_port; with unix=True,
        path: a unix socket only the session's owner, root and an admin uid may connect to."""
        if unix:
            return self._starting("session.expose", port=port, unix=True)
        return self._starting("session.expose", port=port)

    def unexpose(self, port: int) -> None:
        """Close PORT's listeners, the loopback one and the unix socket both."""
        self.client.call("session.unexpose", self._p(port=port))

    def fork(self, count: int = 1) -> List["Session"]:
        ids = self.client.call("session.fork", self._p(count=count))["session_ids"]
        return [Session(self.client, i, self.live) for i in ids]

    def commit(self) -> Dict[str, Any]:
        """Apply the last exec's waiting change (workspace_commit "manual"); its transaction."""
        return self.client.call("session.commit", self._p())["transaction"]

    def discard(self) -> Dict[str, Any]:
        """Throw the last exec's waiting change away; its transaction."""
        return self.client.call("session.discard", self._p())["transaction"]

    def destroy(self) -> None:
        self.client.call("session.destroy", self._p())

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.destroy()
        except RpcError:
            pass


class Process:
    """A process started with spawn() (or found with Client.attach()): write to its stdin,
    read or iterate its output as it comes (Chunks; with a terminal, one stream), signal,
    resize and wait for it."""

    def __init__(self, client: Client, answer: Mapping[str, Any]):
        self.client = client
        self.id: str = answer["process_id"]
        self.num: Optional[int] = answer.get("num")
        self.run_id: Optional[str] = answer.get("run_id")
        self.session_id: Optional[str] = answer.get("session_id")
        self.pty: bool = bool(answer.get("pty"))
        with client._cv:
            self._out = client._output(self.id)
            self._out.claimed = True
            if self._out.end is not None:
                client._procs.pop(self.id, None)

    @property
    def pid(self) -> str:
        """The daemon's id of the process (process_id): what attach() takes."""
        return self.id

    @property
    def exit(self) -> Optional[ProcessExit]:
        """How it ended, once this connection has heard; None while it runs."""
        return self._out.end

    @property
    def dropped(self) -> int:
        """Bytes of output lost: past the replay, or past the buffer while nobody read."""
        return self._out.dropped

    @property
    def buffered(self) -> int:
        """Bytes of output this client holds that nobody has read yet."""
        return self._out.buffered

    def _call(self, method: str, **kw: Any) -> Any:
        return self.client.call(f"process.{method}", dict(kw, process_id=self.id))

    def write(self, data: Union[bytes, str], timeout: Optional[float] = None) -> None:
        """Write DATA to its stdin (its terminal with a pty). Blocks while the process has
        not read what was written before (the daemon's stdin window is full)."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        deadline = None if timeout is None else time.monotonic() + timeout
        for at in range(0, len(raw), STDIN_PIECE):
            piece = base64.b64encode(raw[at:at + STDIN_PIECE]).decode()
            pause = 0.01
            while True:
                try:
                    self._call("write_stdin", data_base64=piece)
                    break
                except BusyError as e:
                    if "stdin" not in e.message or \
                            (deadline is not None and time.monotonic() > deadline):
                        raise
                time.sleep(pause)
                pause = min(pause * 2, 0.2)

    def close_stdin(self) -> None:
        """End of input: the process reads EOF (with a pty, the terminal's ^D at a line start)."""
        self._call("write_stdin", eof=True)

    def read_chunk(self, timeout: Optional[float] = None) -> Optional[Chunk]:
        """The next Chunk of output, or None once the process has ended and all is read."""
        out = self._out

        def ready() -> Optional[Tuple[Optional[Chunk]]]:
            c = out.take()
            if c is not None or out.end is not None:
                return (c,)
            return None

        return self.client._until(ready, timeout)[0]

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next piece of output (either stream), b"" once it has ended and all is read."""
        c = self.read_chunk(timeout)
        return c.data if c is not None else b""

    def __iter__(self) -> Iterator[Chunk]:
        while True:
            c = self.read_chunk()
            if c is None:
                return
            yield c

    def signal(self, sig: Union[str, int] = "TERM") -> None:
        """Send INT, TERM, KILL or HUP to its process group."""
        self._call("signal", signal=sig)

    def resize(self, cols: int, rows: int) -> None:
        """Resize its terminal (SIGWINCH to the foreground job)."""
        self._call("resize", cols=cols, rows=rows)

    def wait(self, timeout: Optional[float] = None) -> ProcessExit:
        """Wait for its end. Output that arrives meanwhile is kept for read() (up to the
        client's output_buffer per process)."""
        end = ProcessExit.from_answer(self.client.call("process.wait", {"process_id": self.id},
                                                       timeout=timeout))
        with self.client._cv:
            if self._out.end is None:
                self._out.end = end
        return end

    def __repr__(self) -> str:
        return f"<cordon.Process {self.id} {'ended' if self.exit else 'running'}>"
