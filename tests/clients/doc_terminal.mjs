// The API document's terminal example (docs/API.md, "Terminals"), read from
// the document and run as written but for the agent's address, with the
// platform's WebSocket (Node 22, or 20 with --experimental-websocket; else the
// ws package) and a stub for xterm.js's term. It goes through a relay that
// drops its connection while the terminal is quiet, and stays down while the
// terminal prints more than the agent's 1 MiB ring: the example's own
// reconnect, with since = attached offset + missed + bytes received, must get
// a missed count for exactly what was evicted and then every kept byte once.
// Prints one summary line. Usage (run by check_node_terminal.sh):
// node [--experimental-websocket] doc_terminal.mjs
import fs from 'node:fs';
import path from 'node:path';
import { WebSocket as WsWebSocket } from 'ws';
import { evictionCmd, evictionOutput, ringBytes, startRelay, waitEnded } from './ws_relay.mjs';

const { SANDBOX_URL: base, SANDBOX_SECRET: secret, CLIENTS_DIR } = process.env;

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function until(what, cond, ms = 20000) {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// The example: the first js block of the Terminals section.
const doc = fs.readFileSync(path.join(CLIENTS_DIR, '..', '..', 'docs', 'API.md'), 'utf8');
const section = doc.slice(doc.indexOf('\n## Terminals\n'));
const block = /```js\n([\s\S]*?)```/.exec(section);
if (!block) fail('no js example in the Terminals section of docs/API.md');
const address = 'ws://127.0.0.1:3030';
if (!block[1].includes(address)) fail(`the example does not connect to ${address}, which this check replaces`);

const r = await fetch(`${base}/start_terminal`, {
  method: 'POST',
  headers: { Authorization: `Bearer ${secret}`, 'Content-Type': 'application/json' },
  body: JSON.stringify({ cmd: evictionCmd }),
});
if (r.status !== 201) fail(`start_terminal: ${r.status} ${await r.text()}`);
const { id } = await r.json();
const relay = await startRelay(base);
// The test's own keyboard, straight to the agent: header auth and no
// subprotocol, as most WebSocket libraries connect by default.
const typer = new WsWebSocket(`${base.replace(/^http/, 'ws')}/terminal_ws?id=${id}`,
  { headers: { Authorization: `Bearer ${secret}` } });
await new Promise((resolve, reject) => { typer.once('open', resolve); typer.once('error', reject); });
typer.on('error', (err) => fail(`the typing client: ${err.message}`));

const chunks = [];
const term = { write: (d) => { if (d instanceof Uint8Array) chunks.push(Buffer.from(d)); } };
const received = () => chunks.reduce((n, c) => n + c.length, 0);
const WebSocketImpl = globalThis.WebSocket ?? WsWebSocket;
const code = block[1].replaceAll(address, relay.url.replace(/^http/, 'ws'));
// eslint-disable-next-line no-new-func -- the document's code, run as written
const example = new Function('WebSocket', 'id', 'secret', 'term',
  `${code}\nreturn { offset: () => offset, exited: () => exited };`)(WebSocketImpl, id, secret, term);

const { want, partOne } = evictionOutput('echo $((6*7))'); // the example types that line
await until('part one', () => received() >= partOne);
relay.down = true;
relay.cut(); // while the terminal waits: the example's offset is the end of part one
typer.send(Buffer.from('\n')); // part two, printed while the example is cut off
await waitEnded(base, secret, id);
relay.down = false;
await until('the exit, after the reconnect', () => example.exited(), 30000);

const got = Buffer.concat(chunks);
const missed = example.offset() - got.length;
if (example.offset() !== want.length) fail(`the example's offset ends at ${example.offset()}, not at the end, ${want.length}`);
if (missed !== want.length - ringBytes - partOne) {
  fail(`missed ${missed}; ${want.length - ringBytes - partOne} were evicted after part one`);
}
if (!got.subarray(0, partOne).equals(want.subarray(0, partOne)) ||
    !got.subarray(partOne).equals(want.subarray(want.length - ringBytes))) {
  fail(`lost or repeated bytes: got ${got.length} bytes, part one ${partOne} and the last ${ringBytes}`);
}
typer.close();
await relay.close();
console.log(`docs/API.md's example (${globalThis.WebSocket ? 'the platform WebSocket' : 'ws'}, ` +
  `${relay.accepted} connections through the relay): dropped at byte ${partOne}, resumed with ` +
  `${missed} missed, then the last ${ringBytes} bytes once (node ${process.version})`);
process.exit(0);
