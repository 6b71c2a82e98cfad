// Headless Chromium opens examples/terminal.html (xterm.js) against the
// agent, driven over the DevTools protocol with the ws package, from file://
// as a user would open it after `npm ci` in examples/ (it loads xterm.js from
// examples/node_modules; no CDN, no server). Three pages:
//   1. the page attaches to a login shell with the token as a subprotocol, a
//      command is typed into it as keystrokes, and its output is read from
//      xterm.js's screen buffer; a screenshot is kept;
//   2. the page, through a relay that drops its connection and stays down
//      while the terminal prints more than the agent's 1 MiB ring, resumes by
//      itself: it gets a missed count for exactly what was evicted, then every
//      kept byte once, and its offset ends at the end of the output;
//   3. a page with a wrong secret, and a copy of the page with no
//      node_modules beside it, each say what is wrong instead of hanging.
// Prints one summary line.
//
// Usage (run by check_browser_terminal.sh):
//   node browser_terminal.mjs TERMINAL_ID SCREENSHOT.png
// with SANDBOX_URL, SANDBOX_SECRET, CHROMIUM and EXAMPLES_DIR set.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { WebSocket } from 'ws';
import { evictionCmd, evictionOutput, ringBytes, startRelay, waitEnded } from './ws_relay.mjs';

const [terminalID, shotPath] = process.argv.slice(2);
const { SANDBOX_URL, SANDBOX_SECRET, CHROMIUM, EXAMPLES_DIR } = process.env;
const deadline = Date.now() + 50000;
const cleanups = [];

async function fail(msg) {
  console.error('FAIL: ' + msg);
  await cleanup();
  process.exit(1);
}
async function cleanup() {
  for (const f of cleanups.splice(0).reverse()) {
    try { await f(); } catch { /* best effort */ }
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Whatever throws, Chromium is not left behind.
process.on('uncaughtException', (err) => fail(`${err?.stack ?? err}`));
process.on('unhandledRejection', (err) => fail(`${err?.stack ?? err}`));

// --- the page, from file:// -------------------------------------------------
const pagePath = path.join(EXAMPLES_DIR, 'terminal.html');
const html = fs.readFileSync(pagePath, 'utf8');
const remote = /\b(?:src|href)\s*=\s*["']?(?:https?:)?\/\//i.exec(html);
if (remote) await fail(`terminal.html loads something from the network: ${remote[0]}`);
if (!fs.existsSync(path.join(EXAMPLES_DIR, 'node_modules', '@xterm', 'xterm', 'lib', 'xterm.js'))) {
  await fail('examples/node_modules/@xterm/xterm is missing: npm ci in examples/ (run.sh does)');
}
const pageURL = (dir, agent, token, id) => `${pathToFileURL(path.join(dir, 'terminal.html'))}#` +
  new URLSearchParams({ url: agent, token, id });

// --- Chromium ---------------------------------------------------------------
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'chromium-check-'));
cleanups.push(() => fs.rmSync(profile, { recursive: true, force: true }));
const chrome = spawn(CHROMIUM, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--no-first-run', '--no-default-browser-check', `--user-data-dir=${profile}`,
  '--remote-debugging-port=0', '--window-size=1000,640', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
cleanups.push(async () => {
  if (chrome.exitCode === null) {
    chrome.kill('SIGKILL');
    await new Promise((r) => chrome.once('exit', r));
  }
});
let chromeLog = '';
const browserWS = await new Promise((resolve) => {
  const timer = setTimeout(() => resolve(null), 20000);
  chrome.stderr.on('data', (d) => {
    chromeLog += d;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(chromeLog);
    if (m) { clearTimeout(timer); resolve(m[1]); }
  });
  chrome.on('exit', () => { clearTimeout(timer); resolve(null); });
});
if (!browserWS) await fail('Chromium did not start: ' + chromeLog.slice(-2000));

// --- the DevTools protocol --------------------------------------------------
const cdp = new WebSocket(browserWS, { perMessageDeflate: false, maxPayload: 256 << 20 });
await new Promise((resolve, reject) => { cdp.once('open', resolve); cdp.once('error', reject); });
cleanups.push(() => cdp.close());
let nextID = 1;
const pending = new Map();
cdp.on('message', (data) => {
  const m = JSON.parse(data.toString());
  const p = pending.get(m.id);
  if (!p) return; // an event
  pending.delete(m.id);
  if (m.error) p.reject(new Error(`${p.method}: ${m.error.message}`));
  else p.resolve(m.result);
});
function send(method, params = {}, sessionId) {
  const id = nextID++;
  cdp.send(JSON.stringify({ id, method, params, sessionId }));
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}
const { product } = await send('Browser.getVersion');

// openPage opens url in a new tab and returns what drives it.
async function openPage(url) {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  const call = (method, params) => send(method, params, sessionId);
  const evaluate = async (expression) => {
    const r = await call('Runtime.evaluate', { expression, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.text}`);
    return r.result.value;
  };
  await call('Page.enable');
  await call('Page.navigate', { url });
  const status = () => evaluate(`document.getElementById('status')?.textContent`).catch(() => '');
  // screen returns the text of xterm.js's buffer, line by line.
  const screen = () => evaluate(`(() => {
    const b = window.sandboxTerminal.term.buffer.active, lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
    return lines.join('\\n');
  })()`);
  const waitFor = async (what, cond) => {
    for (;;) {
      const v = await cond();
      if (v) return v;
      if (Date.now() > deadline) await fail(`timed out waiting for ${what}; the page says: ${await status()}`);
      await sleep(50);
    }
  };
  const close = () => send('Target.closeTarget', { targetId });
  return { call, evaluate, status, screen, waitFor, close };
}
const state = (p) => p.evaluate('window.sandboxTerminal?.state');

// --- 1. typing into a shell ---------------------------------------------------
const p1 = await openPage(pageURL(EXAMPLES_DIR, SANDBOX_URL, SANDBOX_SECRET, terminalID));
await p1.waitFor('the page to attach', async () => (await state(p1)) === 'attached');
await p1.waitFor('the prompt', async () => /[$#] ?$/m.test(await p1.screen()));
// Typed as a user types: text into xterm.js's focused textarea, then Enter.
await p1.call('Input.insertText', { text: 'echo $((6*7)) from-$((40+2))' });
const enter = { key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
await p1.call('Input.dispatchKeyEvent', { type: 'keyDown', text: '\r', ...enter });
await p1.call('Input.dispatchKeyEvent', { type: 'keyUp', ...enter });
const text = await p1.waitFor('42 on the screen', async () => {
  const s = await p1.screen();
  return /^42 from-42\s*$/m.test(s) && s;
});
await sleep(100); // one more frame painted for the screenshot
const shot = await p1.call('Page.captureScreenshot', { format: 'png' });
fs.mkdirSync(path.dirname(shotPath), { recursive: true });
fs.writeFileSync(shotPath, Buffer.from(shot.data, 'base64'));
const lines = text.split('\n').filter((l) => l.trim() !== '').length;
await p1.close();

// --- 2. a resume after eviction -----------------------------------------------
const auth = { Authorization: `Bearer ${SANDBOX_SECRET}` };
const started = await fetch(`${SANDBOX_URL}/start_terminal`, {
  method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ cmd: evictionCmd }),
});
if (started.status !== 201) await fail(`start_terminal: ${started.status} ${await started.text()}`);
const evictID = (await started.json()).id;
const relay = await startRelay(SANDBOX_URL);
cleanups.push(() => relay.close());
// The check's own keyboard, straight to the agent (header, no subprotocol).
const typer = new WebSocket(`${SANDBOX_URL.replace(/^http/, 'ws')}/terminal_ws?id=${evictID}`, { headers: auth });
await new Promise((resolve, reject) => { typer.once('open', resolve); typer.once('error', reject); })
  .catch((err) => fail(`the typing client (no subprotocol, header auth): ${err.message}`));
typer.on('error', (err) => fail(`the typing client: ${err.message}`));
cleanups.push(() => typer.close());

const p2 = await openPage(pageURL(EXAMPLES_DIR, relay.url, SANDBOX_SECRET, evictID));
await p2.waitFor('the page to attach through the relay', async () => (await state(p2)) === 'attached');
// What the page gives xterm.js: the output as bytes, its own notices as
// strings.
await p2.evaluate(`(() => {
  const term = window.sandboxTerminal.term, write = term.write.bind(term);
  window.recorded = [];
  window.notices = [];
  term.write = (d, cb) => {
    if (d instanceof Uint8Array) window.recorded.push(d.slice()); else window.notices.push(String(d));
    return write(d, cb);
  };
})()`);
const { want, partOne } = evictionOutput('');
typer.send(Buffer.from('\n'));
await p2.waitFor('part one', async () => (await p2.evaluate('window.sandboxTerminal.offset')) >= partOne);
relay.down = true;
relay.cut();
await p2.waitFor('the page to see the drop', async () => (await state(p2)) === 'disconnected');
typer.send(Buffer.from('\n')); // part two, printed while the page is cut off
await waitEnded(SANDBOX_URL, SANDBOX_SECRET, evictID);
relay.down = false;
await p2.waitFor('the page to resume and see the exit', async () => (await state(p2)) === 'exited');
const page2 = await p2.evaluate(`(() => {
  let s = '';
  for (const c of window.recorded) for (let i = 0; i < c.length; i += 8192) s += String.fromCharCode(...c.subarray(i, i + 8192));
  return { got: s, offset: window.sandboxTerminal.offset, missed: window.sandboxTerminal.missed, notices: window.notices };
})()`);
const got = Buffer.from(page2.got, 'latin1');
if (page2.offset !== want.length) await fail(`the page's offset ends at ${page2.offset}, not at the end, ${want.length}`);
if (page2.missed !== want.length - ringBytes - partOne) {
  await fail(`the page was told ${page2.missed} missed; ${want.length - ringBytes - partOne} were evicted after part one`);
}
if (!got.subarray(0, partOne).equals(want.subarray(0, partOne)) ||
    !got.subarray(partOne).equals(want.subarray(want.length - ringBytes))) {
  await fail(`lost or repeated bytes: xterm.js got ${got.length} bytes; want part one, ${partOne}, and the last ${ringBytes}`);
}
if (!page2.notices.some((n) => n.includes(`[${page2.missed} bytes of output were dropped]`))) {
  await fail(`the page did not show the gap: ${JSON.stringify(page2.notices)}`);
}
await p2.close();

// --- 3. errors said, not a page stuck at "starting…" --------------------------
const p3 = await openPage(pageURL(EXAMPLES_DIR, SANDBOX_URL, 'not-the-secret', evictID));
await p3.waitFor('the page to give up', async () => (await state(p3)) === 'error');
const refused = await p3.status();
if (!/could not attach/.test(refused)) await fail(`a refused page says: ${refused}`);
await p3.close();
const bare = fs.mkdtempSync(path.join(os.tmpdir(), 'terminal-page-'));
cleanups.push(() => fs.rmSync(bare, { recursive: true, force: true }));
fs.copyFileSync(pagePath, path.join(bare, 'terminal.html'));
const p4 = await openPage(pageURL(bare, SANDBOX_URL, SANDBOX_SECRET, evictID));
await p4.waitFor('the page to say xterm.js is missing', async () => (await state(p4)) === 'error');
const missing = await p4.status();
if (!/npm ci/.test(missing)) await fail(`a page without xterm.js says: ${missing}`);

await send('Browser.close').catch(() => {});
await cleanup();
console.log(`${product}: the page attached with the subprotocol token, typed echo, and xterm.js shows "42 from-42" ` +
  `(${lines} lines on screen); dropped at byte ${partOne}, it resumed with ${page2.missed} missed and got the last ` +
  `${ringBytes} bytes once; a wrong secret and a missing xterm.js are said; screenshot ${shotPath}`);
