"""
`cordon audit report LOG --html OUT`: the log as a page a person reads,
rendered by a real browser (Debian's chromium, headless) and read back as
its DOM. The log is made by real runs whose attacker-influenced strings
carry markup: the command's argv, a host the sandboxed command asked the
gateway for, a tool name an MCP client called, a break-glass reason; and by
an attacker who edits the log file itself. Every one must reach the page as
text: no element, attribute or script of theirs exists in the DOM.

The screenshot of each rendered page is kept under $CORDON_TEST_ARTEFACTS
(default /tmp/cit-artefacts), and its path printed.
"""

import html.parser
import json
import os
import pathlib
import shutil
import subprocess
import textwrap

import pytest

from conftest import Cordon, assert_cordon_refused
from mcp_util import RawClient

ARTEFACTS = pathlib.Path(os.environ.get("CORDON_TEST_ARTEFACTS", "/tmp/cit-artefacts"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

XSS_ARGV = "<script>alert(1)</script>"
XSS_ATTR = '"><img src=x onerror=alert(2)>'
XSS_HOST = "<script>alert(3)</script>"
XSS_TOOL = "<script>alert(4)</script>"
XSS_REASON = "<b onmouseover=alert(5)>incident</b>"

# Sends the gateway requests for hosts no browser should ever see as markup.
HOSTILE_CLIENT = textwrap.dedent(f"""
    import os, socket, urllib.parse
    u = urllib.parse.urlparse(os.environ["HTTP_PROXY"])
    for target in [{XSS_HOST!r} + ":80", {XSS_ATTR!r} + ".example:80"]:
        s = socket.create_connection((u.hostname, u.port))
        s.sendall(f"GET http://{{target}}/ HTTP/1.1\\r\\nHost: {{target}}\\r\\n\\r\\n".encode())
        s.recv(100)
        s.close()
""")

# A minimal MCP server on stdio (stdlib only): one tool, echo.
ECHO_SERVER = textwrap.dedent("""
    import json, sys
    for line in sys.stdin:
        m = json.loads(line)
        if "id" not in m:
            continue
        if m["method"] == "initialize":
            r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
                 "serverInfo": {"name": "echo", "version": "1"}}
        elif m["method"] == "tools/list":
            r = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        else:
            r = {"content": [{"type": "text", "text": "echoed"}]}
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
""")


@pytest.fixture
def rc(identity, bins, hosttmp):
    """cordon as each identity, at the namespace level (the report is the same at each)."""
    return Cordon(identity, bins, hosttmp, "namespace")


class Dom(html.parser.HTMLParser):
    """The elements of a page (tag, attributes, class) and its text per element id."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.elements = []
        self.text = []
        self.stack = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag not in ("meta", "link", "br", "img", "input", "hr"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass

    def handle_data(self, data):
        self.text.append(data)

    def all_text(self):
        return "".join(self.text)

    def by_class(self, cls):
        return [a for t, a in self.elements if cls in (a.get("class") or "").split()]


def render(page, name, tmp):
    """Chromium's DOM of PAGE after rendering, and a screenshot kept as an artefact."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / f"{name}.png"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--no-first-run", f"--user-data-dir={tmp / 'chromium'}", "--window-size=1280,2000"]
    r = subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0 and shot.stat().st_size > 0, r.stderr[-2000:]
    print(f"screenshot: {shot}")
    r = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0 and "</html>" in r.stdout, r.stderr[-2000:]
    return Dom(r.stdout)


def assert_inert(dom):
    """No markup of the log's: no script, no image, no handler, nothing loaded."""
    tags = {t for t, _ in dom.elements}
    assert "script" not in tags and "img" not in tags and "b" not in tags, tags
    assert tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3",
                    "p", "span", "div", "section", "a", "article", "pre", "table", "tbody", "tr",
                    "th", "td"}, tags
    for t, attrs in dom.elements:
        assert not [k for k in attrs if k.startswith("on")], (t, attrs)
        assert not attrs.get("src"), (t, attrs)
        assert t != "a" or attrs.get("href", "").startswith("#run-"), (t, attrs)


def events(log):
    return [json.loads(l) for l in log.read_text().splitlines()]


def make_log(c, log, tmp):
    """Real runs of every kind the report shows, with hostile strings where a run has any."""
    pol = tmp / "bg.yaml"
    pol.write_text("version: 1\nlimits:\n  best_effort: [memory]\nbreak_glass:\n  may_relax: "
                   "[limits.memory]\n  max_duration: 1h\n")
    client = tmp / "client.py"
    client.write_text(HOSTILE_CLIENT)
    server = tmp / "server.py"
    server.write_text(ECHO_SERVER)
    for f in (pol, client, server):
        os.chmod(f, 0o644)
    runs = [
        (["sh", "-c", "exit 3", "sh", XSS_ARGV, XSS_ATTR], ()),
        (["python3", "/opt/client.py"], ("--allow", "ok.example", "--ro",
                                          f"{client}:/opt/client.py")),
        (["true"], ("-p", pol, "--break-glass", XSS_REASON, "--until", "10m", "--relax",
                    "limits.memory=2G")),
        (["sleep", "30"], ("--timeout", "1s")),
        (["true"], ("--level", "microvm,namespace")),
    ]
    for argv, opts in runs:
        r = c.run(argv, *opts, "--audit", log, bind_probe=False, env={"CORDON_QEMU": "/none"})
        assert r.status in (0, 3, 124), r
    # refused before it ran: its only event is run.refused
    r = c.raw("run", "--audit", log, "--expect-policy-digest", "0" * 64, "--", "echo", XSS_ARGV)
    assert_cordon_refused(r, "digest")
    # a brokered MCP session: one call allowed, one refused by name
    mcp = RawClient(c.argv("mcp", "wrap", "--allow-tool", "echo", "--audit", log, "--ro",
                           f"{server}:/opt/server.py", "--", "python3", "/opt/server.py"),
                    c.ident.env())
    mcp.initialize()
    assert "result" in mcp.request(1, "tools/call", {"name": "echo", "arguments": {}})
    mcp.request(2, "tools/call", {"name": XSS_TOOL, "arguments": {}})
    assert mcp.close()[0] == 0


def test_report_renders_every_run_as_text(rc, hosttmp):
    d = rc.hostdir("audit", mode=0o700)
    log = d / "audit.jsonl"
    make_log(rc, log, rc.hostdir("in"))
    # the refused run had no id yet: its entry is "-"
    ids = list(dict.fromkeys(e["run"] or "-" for e in events(log)
                             if e["run"] or e["type"] == "run.refused"))
    assert len(ids) == 7, ids
    page = rc.hostdir("page") / "report.html"
    r = rc.raw("audit", "report", log, "--html", page)
    assert r.status == 0 and r.out == "" and r.err == "", r
    dom = render(page, f"audit-report-{rc.ident.name}", hosttmp)
    assert_inert(dom)
    # every run, in the order of the log, each on the timeline and with its section
    assert [a["data-run"] for a in dom.by_class("run")] == ids
    assert len(dom.by_class("track")) == len(ids)
    text = dom.all_text()
    assert "Chain intact" in text and "7 runs" in text, text[:500]
    # the hostile strings, each as text where a person reads it
    for s in (XSS_ARGV, XSS_ATTR, XSS_HOST, XSS_TOOL, XSS_REASON):
        assert s in text, s
    ev = events(log)
    start = [e for e in ev if e["type"] == "run.start"]
    assert start[0]["policy_digest"] in text
    for word in ("enforced by", "limit fired: wall", "Break-glass", "Tool calls", "refused",
                 "levels skipped", "no QEMU at", "exited 3", "verification", "chain verified"):
        assert word in text, word
    # the egress decisions: the refused hostile host, with the gateway's rule
    assert "bad_request" in text or "not_allowed" in text


def test_edited_log_is_shown_broken_and_inert(rc, hosttmp):
    """The attacker writes the log itself: markup in a run id, argv and level of a forged
    line. The chain breaks there; the page says so and still runs nothing of theirs."""
    d = rc.hostdir("audit", mode=0o700)
    log = d / "audit.jsonl"
    first = rc.run(["true"], "--audit", log, bind_probe=False)
    assert first.status == 0, first
    ev = events(log)
    forged = dict(ev[-1], seq=ev[-1]["seq"] + 1, type="run.start", prev="0" * 64,
                  run=XSS_ATTR, level=XSS_ARGV, argv=["</pre>" + XSS_ARGV],
                  ts="2030-01-01T00:00:00.000000Z")
    with open(log, "a") as f:
        f.write(json.dumps(forged) + "\n")
        f.write("<script>alert(6)</script>\n")
    page = rc.hostdir("page") / "report.html"
    r = rc.raw("audit", "report", log, "--html", page)
    assert r.status == 1 and r.err == "", r
    dom = render(page, f"audit-report-edited-{rc.ident.name}", hosttmp)
    assert_inert(dom)
    text = dom.all_text()
    assert f"Chain broken at line {len(ev) + 1}" in text, text[:600]
    assert [a["data-run"] for a in dom.by_class("run")] == [first.result["run_id"], XSS_ATTR]
    assert "</pre>" + XSS_ARGV in text and "not verified" in text


def test_report_of_one_run_and_refusals(rc, hosttmp):
    d = rc.hostdir("audit", mode=0o700)
    log = d / "audit.jsonl"
    ids = []
    for code in ("0", "1"):
        r = rc.run(["sh", "-c", f"exit {code}"], "--audit", log, bind_probe=False)
        ids.append(r.result["run_id"])
    page = rc.hostdir("page") / "one.html"
    r = rc.raw("audit", "report", log, "--run", ids[1][:10], "--html", page)
    assert r.status == 0, r
    dom = Dom(page.read_text())
    assert [a["data-run"] for a in dom.by_class("run")] == [ids[1]]
    r = rc.raw("audit", "report", log, "--html", "-")
    assert r.status == 0 and r.out.count('class="run"') == 2, r
    # bad input: one line, exit 125, no page left behind
    bad = rc.hostdir("bad") / "bad.html"
    for argv, words in [((log, "--html", bad, "--run", "ffffffff"), ["no run 'ffffffff'"]),
                        ((log,), ["--html"]),
                        ((d / "missing.jsonl", "--html", bad), ["missing.jsonl"]),
                        ((log, "--html", bad, "--key", d / "nokey.pem"), ["nokey.pem"])]:
        r = rc.raw("audit", "report", *argv)
        assert_cordon_refused(r, *words)
        assert not bad.exists()
    # a link planted where the page goes is replaced, never written through
    target = hosttmp / "target"
    target.write_text("keep\n")
    link = rc.hostdir("out", mode=0o777) / "page.html"
    link.symlink_to(target)
    r = rc.raw("audit", "report", log, "--html", link)
    assert r.status == 0 and target.read_text() == "keep\n", r
    assert not link.is_symlink() and "cordon audit report" in link.read_text()
