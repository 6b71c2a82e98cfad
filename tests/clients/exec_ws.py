"""Python's websocket-client (Debian python3-websocket) speaking /exec_ws's
channel protocol, as a client in another language would: the token in the
Authorization header and no subprotocol offered; every byte value through
stdin and back on stdout, stderr apart; EOF on stdin with "255 0"; argv
with a space and a quote; a refused request (close 1008 and an error
message); and a TTY resized. Prints one summary line. Run by
check_python_exec.sh."""
import json
import os
import sys

import websocket

BASE = os.environ["SANDBOX_URL"]
SECRET = os.environ["SANDBOX_SECRET"]
URL = BASE.replace("http", "ws", 1) + "/exec_ws"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(request, stdin_frames=(), controls=()):
    """Runs one request; returns (stdout, stderr, messages, close code)."""
    ws = websocket.create_connection(URL, header=["Authorization: Bearer " + SECRET], timeout=20)
    if ws.getsubprotocol() is not None:
        fail("a subprotocol was selected though none was offered: %r" % ws.getsubprotocol())
    ws.send(json.dumps(request))
    out, err, msgs = bytearray(), bytearray(), []
    sent = False
    while True:
        op, data = ws.recv_data(control_frame=True)
        if op == websocket.ABNF.OPCODE_CLOSE:
            code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
            return bytes(out), bytes(err), msgs, code
        if op == websocket.ABNF.OPCODE_TEXT:
            m = json.loads(data)
            msgs.append(m)
            if m["type"] == "started" and not sent:
                sent = True
                for c in controls:
                    ws.send(json.dumps(c))
                for f in stdin_frames:
                    ws.send_binary(f)
        elif op == websocket.ABNF.OPCODE_BINARY:
            if data[0] == 1:
                out += data[1:]
            elif data[0] == 2:
                err += data[1:]
            else:
                fail("output on channel %d" % data[0])


every = bytes(range(256)) * 64
out, err, msgs, code = run({"cmd": "cat; printf 'done' >&2", "stdin": True},
                           [b"\x00" + every[:8000], b"\x00" + every[8000:], b"\xff\x00"])
if out != every:
    fail("stdout is not what went in: %d bytes, want %d" % (len(out), len(every)))
if err != b"done":
    fail("stderr: %r" % err)
if msgs[0]["type"] != "started" or msgs[-1] != {"type": "exit", "code": 0, "termination": {"reason": "exit"}}:
    fail("messages: %r" % msgs)
if code != 1000:
    fail("close code %r" % code)

out, err, msgs, code = run({"argv": ["printf", "%s|", "a b", "it's"]})
if out != b"a b|it's|":
    fail("argv: %r" % out)

out, err, msgs, code = run({"cmd": "true", "cwd": "/no/such/dir"})
if code != 1008 or msgs[0]["type"] != "error" or "/no/such/dir" not in msgs[0]["error"]:
    fail("a bad cwd: %r, close %r" % (msgs, code))

out, err, msgs, code = run({"cmd": "stty size", "tty": True, "cols": 91, "rows": 17})
if out != b"17 91\r\n":
    fail("tty size: %r" % out)

print("bytes 0-255 both ways, EOF, argv, refusal, tty: ok")
