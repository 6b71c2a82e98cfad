#!/usr/bin/env bash
# paramiko over a socket tunnelled with a raw CONNECT, as sandbox SDKs do
# (CONNECT host:port with Proxy-Authorization, then SSH on the socket): a
# command runs and SFTP moves a file there and back.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

start_sshd
head -c 1048576 /dev/urandom >"$TMP/payload"
timeout 40 "$PYDEB" - "${SANDBOX_URL#http://}" "$SANDBOX_SECRET" "$SSH_PORT" "$TMP" <<'PY' || fail "paramiko failed"
import hashlib, socket, sys
import paramiko

agent, secret, port, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
host, agent_port = agent.rsplit(":", 1)
sock = socket.create_connection((host, int(agent_port)), timeout=10)
sock.sendall((f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
              f"Proxy-Authorization: Bearer {secret}\r\n\r\n").encode())
reply = b""
while not reply.endswith(b"\r\n\r\n"):  # byte by byte: sshd's banner follows at once
    b = sock.recv(1)
    if not b:
        sys.exit(f"the agent closed before its reply: {reply!r}")
    reply += b
status = reply.split(b"\r\n", 1)[0]
if not status.startswith(b"HTTP/1.1 200"):
    sys.exit(f"CONNECT refused: {status!r}")

client = paramiko.SSHClient()
client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
client.connect("127.0.0.1", port=port, username="root", key_filename=f"{tmp}/id",
               sock=sock, look_for_keys=False, allow_agent=False, timeout=10)
_, out, _ = client.exec_command("echo ok")
got = out.read().decode().strip()
if got != "ok":
    sys.exit(f"exec printed {got!r}")
sftp = client.open_sftp()
sftp.put(f"{tmp}/payload", f"{tmp}/payload.remote")
sftp.get(f"{tmp}/payload.remote", f"{tmp}/payload.back")
sftp.close()
client.close()
digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
if digest(f"{tmp}/payload") != digest(f"{tmp}/payload.back"):
    sys.exit("the file came back different")
print(f"{status.decode()}; exec echo ok; 1 MiB by SFTP there and back intact (paramiko {paramiko.__version__})")
PY
