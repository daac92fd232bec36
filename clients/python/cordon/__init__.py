"""
cordon: a stdlib-only client for `cordon serve`, the daemon that runs each
call in a fresh sandbox (JSON-RPC 2.0, one object per line, on a unix socket).

    import cordon
    with cordon.Client("/run/cordon.sock") as c:
        print(c.run(["echo", "hi"]).stdout)        # b'hi\\n'
        p = c.spawn(["python3", "-q", "-i"], pty=True)
        p.write("2+2\\n")                           # p.read() -> b'2+2\\r\\n4\\r\\n>>> '
"""

from .client import (Client, CordonError, Result, RpcError, Session, BusyError,
                     Chunk, Process, ProcessExit)

__all__ = ["Client", "CordonError", "RpcError", "BusyError", "Result", "Session", "Chunk",
           "Process", "ProcessExit"]
