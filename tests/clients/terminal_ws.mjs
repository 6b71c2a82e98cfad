// The Node.js `ws` package against /terminal_ws, authenticating with the
// subprotocol bearer.<base64url(secret)> as a browser would: echo, resize,
// Ctrl-C, and a resume after a connection dropped mid-output that gets every
// byte exactly once. Prints one summary line. Usage (run by
// check_node_terminal.sh): node terminal_ws.mjs
import { WebSocket } from 'ws';

const base = process.env.SANDBOX_URL;
const secret = process.env.SANDBOX_SECRET;
const wsBase = base.replace(/^http/, 'ws');
const protocols = ['sandbox-executor', 'bearer.' + Buffer.from(secret).toString('base64url')];

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

async function startTerminal(body) {
  const r = await fetch(`${base}/start_terminal`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (r.status !== 201) fail(`start_terminal: ${r.status} ${await r.text()}`);
  return (await r.json()).id;
}

// attach opens a WebSocket to terminal id (at since, if given) and gathers
// what it says: out is the output as text, attached the first offset.
function attach(id, since) {
  const url = `${wsBase}/terminal_ws?id=${id}` + (since === undefined ? '' : `&since=${since}`);
  const ws = new WebSocket(url, protocols);
  const t = { ws, out: Buffer.alloc(0), attached: null, missed: 0, exit: null, closed: null, waiters: [] };
  const wake = () => { for (const w of t.waiters.splice(0)) w(); };
  ws.on('message', (data, isBinary) => {
    if (isBinary) {
      if (t.attached === null) fail('output before attached');
      t.out = Buffer.concat([t.out, data]);
    } else {
      const m = JSON.parse(data.toString());
      if (m.type === 'attached') t.attached = m.offset;
      else if (m.type === 'missed') t.missed += m.bytes;
      else if (m.type === 'exit') t.exit = m.code;
    }
    wake();
  });
  ws.on('close', (code) => { t.closed = code; wake(); });
  ws.on('error', (err) => fail(`WebSocket: ${err.message}`));
  return t;
}

// until resolves once cond(t) holds, or fails after ms.
function until(t, cond, what, ms = 10000) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => fail(`timed out waiting for ${what}; output: ${JSON.stringify(t.out.toString().slice(-300))}`), ms);
    const check = () => {
      if (cond(t)) { clearTimeout(timer); resolve(); return; }
      if (t.closed !== null && !cond(t)) { clearTimeout(timer); fail(`closed (${t.closed}) before ${what}`); }
      t.waiters.push(check);
    };
    check();
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const type = (t, s) => t.ws.send(Buffer.from(s)); // a Buffer goes as a binary frame

// 1. The login shell: echo, resize, Ctrl-C.
const id = await startTerminal({ env: { PS1: '$ ' } });
const t = attach(id);
await until(t, (t) => t.attached !== null, 'attached');
if (t.ws.protocol !== 'sandbox-executor') fail(`the agent selected ${t.ws.protocol}`);
type(t, 'echo $((6*7))\n');
await until(t, (t) => /[\r\n]42\r\n/.test(t.out.toString()), '42');
t.ws.send(JSON.stringify({ type: 'resize', cols: 101, rows: 37 }));
type(t, 'stty size\n');
await until(t, (t) => t.out.toString().includes('37 101\r\n'), 'the new size');
type(t, 'echo ready-$((1+1)); sleep 100\n');
await until(t, (t) => t.out.toString().includes('ready-2\r\n'), 'sleep to start');
await sleep(300); // the shell forks sleep after echo: Ctrl-C must reach sleep
const interruptedAt = Date.now();
type(t, '\x03');
type(t, 'echo alive-$((2+3))\n');
await until(t, (t) => t.out.toString().includes('alive-5\r\n'), 'the prompt after Ctrl-C', 5000);
const interruptMs = Date.now() - interruptedAt;
type(t, 'exit 0\n');
await until(t, (t) => t.exit !== null && t.closed !== null, 'exit');
if (t.exit !== 0 || t.closed !== 1000) fail(`exit ${t.exit}, close ${t.closed}`);

// 2. A resume: disconnect while output flows, reconnect with since.
const n = 100000;
const seqID = await startTerminal({ cmd: `read x; seq 1 ${n}` });
const a = attach(seqID);
await until(a, (a) => a.attached !== null, 'attached');
type(a, '\n');
await until(a, (a) => a.out.length > 100 * 1024, '100 KiB of output');
a.ws.terminate(); // drops the connection: no close handshake
const first = a.out;
const since = a.attached + a.missed + first.length;
const b = attach(seqID, since);
await until(b, (b) => b.exit !== null && b.closed !== null, 'the end of seq', 20000);
let want = '\r\n';
for (let i = 1; i <= n; i++) want += i + '\r\n';
const got = Buffer.concat([first, b.out]).toString();
if (b.attached !== since || b.missed !== 0) fail(`resumed at ${b.attached} with ${b.missed} missed, asked ${since}`);
if (got !== want) fail(`after the resume: ${got.length} bytes, want ${want.length} (lost or repeated bytes)`);
console.log(`ws ${process.env.WS_VERSION || ''}: 42, stty size 37 101, Ctrl-C ended sleep 100 in ${interruptMs} ms, ` +
  `resume at byte ${since} of ${want.length}: every byte once (node ${process.version})`);
