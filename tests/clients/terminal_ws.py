"""Python's websocket-client (Debian python3-websocket) against /terminal_ws,
with the token in the Authorization header: echo, resize, Ctrl-C, a resume
after a connection dropped mid-output that gets every byte exactly once, the
client's default of offering no subprotocol (accepted), a refused upgrade
that says why in the status line the client shows, and resumes after the
ring has evicted what the client missed, with the documented arithmetic
(attached offset + missed + bytes received). Prints one summary line. Run by
check_python_terminal.sh."""
import base64
import json
import os
import re
import sys
import time

import requests
import websocket

BASE = os.environ["SANDBOX_URL"]
SECRET = os.environ["SANDBOX_SECRET"]
AUTH = {"Authorization": "Bearer " + SECRET}


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def start_terminal(body):
    r = requests.post(BASE + "/start_terminal", json=body, headers=AUTH, timeout=10)
    if r.status_code != 201:
        fail("start_terminal: %d %s" % (r.status_code, r.text))
    return r.json()["id"]


class Term:
    """One WebSocket to a terminal, and what it said."""

    def __init__(self, tid, since=None, subprotocols=("sandbox-executor",)):
        url = BASE.replace("http", "ws", 1) + "/terminal_ws?id=" + tid
        if since is not None:
            url += "&since=%d" % since
        self.ws = websocket.create_connection(
            url, header=["Authorization: Bearer " + SECRET],
            subprotocols=list(subprotocols) or None, timeout=10)
        self.out = b""
        self.attached = None
        self.missed = 0
        self.exit = None
        self.closed = None

    def read_until(self, cond, what, timeout=10):
        deadline = time.monotonic() + timeout
        while not cond(self):
            if self.closed is not None:
                fail("closed (%s) before %s; output %r" % (self.closed, what, self.out[-300:]))
            if time.monotonic() > deadline:
                fail("timed out waiting for %s; output %r" % (what, self.out[-300:]))
            opcode, data = self.ws.recv_data(control_frame=False)
            if opcode == websocket.ABNF.OPCODE_BINARY:
                if self.attached is None:
                    fail("output before attached")
                self.out += data
            elif opcode == websocket.ABNF.OPCODE_TEXT:
                m = json.loads(data)
                if m["type"] == "attached":
                    self.attached = m["offset"]
                elif m["type"] == "missed":
                    self.missed += m["bytes"]
                elif m["type"] == "exit":
                    self.exit = m["code"]
            elif opcode == websocket.ABNF.OPCODE_CLOSE:
                self.closed = int.from_bytes(data[:2], "big") if len(data) >= 2 else 1005

    def type(self, s):
        self.ws.send_binary(s.encode())

    def contains(self, s):
        return s.encode() in self.out

    def next(self):
        """The offset to resume at: attached + missed + bytes received."""
        return self.attached + self.missed + len(self.out)


def wait_ended(tid):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = requests.get(BASE + "/list_terminals", headers=AUTH, timeout=10)
        if any(t["id"] == tid and t["status"] != "running" for t in r.json()["terminals"]):
            return
        time.sleep(0.05)
    fail("terminal %s did not end" % tid)


# 1. The login shell: echo, resize, Ctrl-C.
t = Term(start_terminal({"env": {"PS1": "$ "}}))
t.read_until(lambda t: t.attached is not None, "attached")
if t.ws.getsubprotocol() != "sandbox-executor":
    fail("the agent selected %r" % t.ws.getsubprotocol())
t.type("echo $((6*7))\n")
t.read_until(lambda t: re.search(rb"[\r\n]42\r\n", t.out), "42")
t.ws.send(json.dumps({"type": "resize", "cols": 99, "rows": 33}))
t.type("stty size\n")
t.read_until(lambda t: t.contains("33 99\r\n"), "the new size")
t.type("echo ready-$((1+1)); sleep 100\n")
t.read_until(lambda t: t.contains("ready-2\r\n"), "sleep to start")
time.sleep(0.3)  # the shell forks sleep after echo: Ctrl-C must reach sleep
start = time.monotonic()
t.type("\x03")
t.type("echo alive-$((2+3))\n")
t.read_until(lambda t: t.contains("alive-5\r\n"), "the prompt after Ctrl-C", timeout=5)
interrupt_ms = (time.monotonic() - start) * 1000
t.type("exit 0\n")
t.read_until(lambda t: t.exit is not None and t.closed is not None, "exit")
if t.exit != 0 or t.closed != 1000:
    fail("exit %s, close %s" % (t.exit, t.closed))

# 2. A resume: disconnect while output flows, reconnect with since.
n = 100000
sid = start_terminal({"cmd": "read x; seq 1 %d" % n})
a = Term(sid)
a.read_until(lambda a: a.attached is not None, "attached")
a.type("\n")
a.read_until(lambda a: len(a.out) > 100 * 1024, "100 KiB of output")
a.ws.sock.close()  # drops the connection: no close handshake
since = a.attached + a.missed + len(a.out)
b = Term(sid, since)
b.read_until(lambda b: b.exit is not None and b.closed is not None, "the end of seq", timeout=20)
want = b"\r\n" + b"".join(b"%d\r\n" % i for i in range(1, n + 1))
got = a.out + b.out
if b.attached != since or b.missed:
    fail("resumed at %s with %d missed, asked %d" % (b.attached, b.missed, since))
if got != want:
    fail("after the resume: %d bytes, want %d (lost or repeated bytes)" % (len(got), len(want)))

# 3. The client's default: no subprotocol, the token in the header.
c = Term(start_terminal({"cmd": "read x; echo got-$x"}), subprotocols=())
c.read_until(lambda c: c.attached is not None, "attached")
if c.ws.getsubprotocol() is not None:
    fail("with no subprotocol offered, the agent selected %r" % c.ws.getsubprotocol())
c.type("plain\n")
c.read_until(lambda c: c.exit is not None and c.closed is not None, "exit")
if not c.contains("got-plain\r\n"):
    fail("no echo without a subprotocol: %r" % c.out)

# 4. A refused upgrade says why where this client looks: its exception
# shows the status line (this version does not show the body).
token = "bearer." + base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("=")
try:
    websocket.create_connection(BASE.replace("http", "ws", 1) + "/terminal_ws?id=" + sid,
                                subprotocols=[token], timeout=10)
    fail("an upgrade offering only bearer.* was accepted")
except websocket.WebSocketBadStatusException as e:
    refused = str(e)
    if e.status_code != 400 or "sandbox-executor" not in refused:
        fail("refused with %d %r: it does not name sandbox-executor" % (e.status_code, refused))

# 5. Resumes after eviction: a reads part one whole and drops; part two,
# twice the 1 MiB ring and more, is written while no client reads; each
# resume uses attached + missed + bytes received.
n = 300000
eid = start_terminal({"cmd": "read x; seq 1 20000; read y; seq 20001 %d" % n})
want = (b"\r\n" + b"".join(b"%d\r\n" % i for i in range(1, 20001)) +
        b"\r\n" + b"".join(b"%d\r\n" % i for i in range(20001, n + 1)))
a = Term(eid)
a.read_until(lambda a: a.attached is not None, "attached")
a.type("\n")
a.read_until(lambda a: a.out.endswith(b"\n20000\r\n"), "part one")
a.ws.sock.close()
typer = Term(eid, subprotocols=())
typer.type("\n")
typer.ws.close()
wait_ended(eid)
b = Term(eid, a.next())
b.read_until(lambda b: len(b.out) > 32 * 1024, "32 KiB after the resume")
b.ws.sock.close()
ring = 1 << 20
if b.attached != a.next() or b.missed != len(want) - ring - a.next():
    fail("resumed at %s with %d missed; asked %d, and %d were evicted from there"
         % (b.attached, b.missed, a.next(), len(want) - ring - a.next()))
c2 = Term(eid, b.next())
c2.read_until(lambda c: c.exit is not None and c.closed is not None, "the end of seq", timeout=20)
if c2.attached != b.next() or c2.missed or c2.next() != len(want):
    fail("second resume at %s with %d missed, ending at %d of %d" % (c2.attached, c2.missed, c2.next(), len(want)))
if a.out != want[:len(a.out)] or b.out + c2.out != want[-ring:]:
    fail("after the resumes: lost or repeated bytes")

print("websocket-client %s: 42, stty size 33 99, Ctrl-C ended sleep 100 in %.0f ms, resume at byte %d: "
      "every byte once; no subprotocol accepted; refused: %s; after eviction: %d missed, then every kept byte once "
      "(python %s)" % (websocket.__version__, interrupt_ms, since, refused, b.missed, sys.version.split()[0]))
