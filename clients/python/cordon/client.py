"""The client: one connection, requests and answers matched by id."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import socket
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

BUSY = -32002


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


class Client:
    """A connection to `cordon serve` at PATH. Thread-safe: calls may overlap."""

    def __init__(self, path: str, timeout: Optional[float] = None):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(str(path))
        except OSError as e:
            self._sock.close()
            raise CordonError(f"cannot connect to the daemon at {path}: {e}") from e
        self._sock.settimeout(timeout)
        self._file = self._sock.makefile("rb")
        self._ids = itertools.count(1)
        self._lock = threading.Lock()        # one reader at a time
        self._send_lock = threading.Lock()
        self._answers: Dict[int, Dict[str, Any]] = {}
        self._notes: Dict[int, List[Dict[str, Any]]] = {}
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

    def _read_one(self) -> None:
        line = self._file.readline()
        if not line:
            raise CordonError("the daemon closed the connection")
        try:
            msg = json.loads(line, object_pairs_hook=_unique_keys)
        except ValueError as e:
            raise CordonError(f"the daemon sent something not JSON: {line[:200]!r}") from e
        if "method" in msg:
            params = msg.get("params") or {}
            if isinstance(params.get("id"), int):
                self._notes.setdefault(params["id"], []).append(params)
        elif isinstance(msg.get("id"), int):
            self._answers[msg["id"]] = msg
        elif "error" in msg:
            raise _error(msg["error"])

    def _wait(self, id: int, notes: bool = False) -> Iterator[Dict[str, Any]]:
        """Yield ID's notifications (if NOTES), then its answer last."""
        while True:
            with self._lock:
                if notes and self._notes.get(id):
                    yield from self._notes.pop(id)
                    continue
                if id in self._answers:
                    self._notes.pop(id, None)
                    yield self._answers.pop(id)
                    return
                self._read_one()

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        """Any method; its result, or RpcError."""
        id = self._send(method, params)
        ans: Dict[str, Any] = {}
        for ans in self._wait(id):
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

    def health(self) -> Dict[str, Any]:
        return self.call("health")

    def stats(self) -> Dict[str, Any]:
        return self.call("stats")

    def policy_check(self, policy: Optional[str] = None) -> Dict[str, Any]:
        return self.call("policy.check", {"policy": policy} if policy is not None else {})

    def session(self, workspace_mode: Optional[str] = None,
                workspace_commit: Optional[str] = None) -> "Session":
        """A new session (a workspace kept between runs); use it as a context manager.
        workspace_mode "overlay" runs each exec on a layer, committed per workspace_commit
        ("on_success", "always", or "manual": Session.commit() / Session.discard())."""
        p = {k: v for k, v in (("workspace_mode", workspace_mode),
                               ("workspace_commit", workspace_commit)) if v is not None}
        return Session(self, self.call("session.create", p)["session_id"])

    def sessions(self) -> List[Dict[str, Any]]:
        """This uid's own sessions (every uid's for a daemon's --admin-uid): session_id,
        owner, state ("idle", "running", "committing", ...), workspace_mode, pending..."""
        return self.call("session.list")["sessions"]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._file.close()
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

    def __init__(self, client: Client, session_id: str):
        self.client = client
        self.id = session_id

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

    def fork(self, count: int = 1) -> List["Session"]:
        ids = self.client.call("session.fork", self._p(count=count))["session_ids"]
        return [Session(self.client, i) for i in ids]

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
