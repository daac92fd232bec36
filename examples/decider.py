#!/usr/bin/python3
"""A reference runtime decider for cordon (see src/common/decider.h).

    decider.py SOCKET [--rules RULES.json] [--interactive]
    decider.py --stdin [--rules RULES.json]      (as decider.command)

Listens on the unix socket SOCKET. For each question cordon asks (one JSON
line per connection) it answers one JSON line. RULES.json maps a question's
key (a tool name, or HOST:PORT for egress) to a decision: "allow_once",
"allow_run", "allow_session" or "deny"; "*" is the fallback. Without a rule
the answer is deny. With --interactive and a terminal, an unmatched
question is put to the person at it (y = once, r = run, s = session).
Every question and answer is printed on stderr. Standard library only.
"""

import argparse
import json
import os
import socket
import sys

NAME = "cordon-reference-decider/1"
DECISIONS = ("allow_once", "allow_run", "allow_session", "deny")


def decide(q, rules, interactive):
    key = q.get("key", "")
    decision = rules.get(key, rules.get("*"))
    if decision in DECISIONS:
        return decision, f"rule for {key if key in rules else '*'}"
    if interactive and sys.stdin.isatty():
        ans = input(f"cordon asks: {q.get('kind')} {key} {json.dumps(q.get('question'))}"
                    " [y/r/s/N] ").strip().lower()
        return {"y": "allow_once", "r": "allow_run", "s": "allow_session"}.get(ans, "deny"), \
            "asked a person"
    return "deny", "no rule"


def answer(q, rules, interactive):
    decision, reason = decide(q, rules, interactive)
    print(f"decider: {q.get('kind')} {q.get('key')} -> {decision}", file=sys.stderr, flush=True)
    return {"id": q.get("id"), "decision": decision, "reason": reason, "decider": NAME}


def serve(path, rules, interactive):
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o666)
    srv.listen(16)
    print(f"decider: listening on {path}", file=sys.stderr, flush=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while b"\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            try:
                q = json.loads(data.split(b"\n", 1)[0])
            except ValueError:
                continue
            try:
                conn.sendall(json.dumps(answer(q, rules, interactive)).encode() + b"\n")
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket", nargs="?")
    ap.add_argument("--stdin", action="store_true", help="answer one question on stdin")
    ap.add_argument("--rules", help="JSON file: {KEY: DECISION, '*': DECISION}")
    ap.add_argument("--interactive", action="store_true")
    a = ap.parse_args()
    rules = {}
    if a.rules:
        with open(a.rules) as f:
            rules = json.load(f)
    if a.stdin:
        q = json.loads(sys.stdin.readline())
        print(json.dumps(answer(q, rules, False)), flush=True)
        return
    if not a.socket:
        ap.error("SOCKET or --stdin")
    serve(a.socket, rules, a.interactive)


if __name__ == "__main__":
    main()
