"""
A real gRPC client for cordon's sandboxd front end (test_sandboxd.py): the
message classes protoc makes from proto/process/v1/process.proto, and
grpcio's channel calling /process.v1.ProcessService/* exactly as a stub
generated from the same file does. Also runnable as a script, to call as
another uid: `sandboxd_client.py PBDIR ADDR METHOD JSON` prints the status
code's name and the answer.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVICE = "/process.v1.ProcessService/"


def generate(out_dir):
    """process_pb2.py from the repository's .proto into OUT_DIR (readable by every uid)."""
    subprocess.run(["protoc", "-I", os.path.join(ROOT, "proto"), "-I", "/usr/include",
                    "--python_out", str(out_dir), "process/v1/process.proto"], check=True)
    for d, _, files in os.walk(out_dir):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)


def load(pb_dir):
    if pb_dir not in sys.path:
        sys.path.insert(0, pb_dir)
    from process.v1 import process_pb2
    return process_pb2


class Client:
    def __init__(self, pb_dir, address):
        import grpc
        self.grpc = grpc
        self.pb = load(pb_dir)
        self.channel = grpc.insecure_channel(address)
        pb = self.pb
        kinds = {"Start": (pb.StartRequest, pb.StartResponse, True),
                 "Execute": (pb.ExecuteRequest, pb.ExecuteResponse, False),
                 "WriteStdin": (pb.WriteStdinRequest, pb.WriteStdinResponse, False),
                 "SendSignal": (pb.SendSignalRequest, pb.SendSignalResponse, False),
                 "ResizeTTY": (pb.ResizeTTYRequest, pb.ResizeTTYResponse, False)}
        self.calls = {}
        for name, (req, resp, stream) in kinds.items():
            make = self.channel.unary_stream if stream else self.channel.unary_unary
            self.calls[name] = make(SERVICE + name, request_serializer=req.SerializeToString,
                                    response_deserializer=resp.FromString)

    def raw(self, method, data, stream=False, timeout=60):
        """METHOD with DATA as the request's bytes, unchecked: a hostile client."""
        make = self.channel.unary_stream if stream else self.channel.unary_unary
        call = make(SERVICE + method, request_serializer=lambda b: b,
                    response_deserializer=lambda b: b)
        r = call(data, timeout=timeout)
        return list(r) if stream else r

    def config(self, command, env=None, cwd=None):
        c = self.pb.ProcessConfig(command=command, env_vars=env or {})
        if cwd is not None:
            c.cwd = cwd
        return c

    def execute(self, command, timeout=120, **kw):
        return self.calls["Execute"](self.pb.ExecuteRequest(config=self.config(command, **kw)),
                                     timeout=timeout)

    def start(self, command, pty=None, timeout=300, **kw):
        req = self.pb.StartRequest(config=self.config(command, **kw))
        if pty:
            req.pty.cols, req.pty.rows = pty
        return self.calls["Start"](req, timeout=timeout)

    def write(self, pid, data=None, eof=False):
        req = self.pb.WriteStdinRequest(process_id=pid)
        if eof:
            req.eof.SetInParent()
        else:
            req.input = data.encode() if isinstance(data, str) else data
        return self.calls["WriteStdin"](req, timeout=60)

    def signal(self, pid, sig):
        return self.calls["SendSignal"](self.pb.SendSignalRequest(process_id=pid, signal=sig),
                                        timeout=60)

    def resize(self, pid, cols, rows):
        return self.calls["ResizeTTY"](self.pb.ResizeTTYRequest(process_id=pid, cols=cols,
                                                                rows=rows), timeout=60)

    def close(self):
        self.channel.close()


def main():
    pb_dir, address, method, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    c = Client(pb_dir, address)
    try:
        r = getattr(c, method)(*args)
        if method == "start":
            r = [str(x) for x in r]
        print(json.dumps(["OK", str(r)]))
    except c.grpc.RpcError as e:
        print(json.dumps([e.code().name, e.details()]))


if __name__ == "__main__":
    main()
