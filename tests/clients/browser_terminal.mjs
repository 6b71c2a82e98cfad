// Headless Chromium opens examples/terminal.html (xterm.js) against the
// agent, driven over the DevTools protocol with the ws package: the page
// attaches to a terminal with the token as a subprotocol, a command is typed
// into it as keystrokes, and its output is read from xterm.js's screen
// buffer. A screenshot of the page is kept. Prints one summary line.
//
// Usage (run by check_browser_terminal.sh):
//   node browser_terminal.mjs TERMINAL_ID SCREENSHOT.png
// with SANDBOX_URL, SANDBOX_SECRET, CHROMIUM, CLIENTS_DIR and EXAMPLES_DIR set.
//
// The page loads xterm.js from a CDN by default; here it is served, with the
// page, from node_modules by a static server on 127.0.0.1, as there is no
// network. The agent serves no static files.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';

const [terminalID, shotPath] = process.argv.slice(2);
const { SANDBOX_URL, SANDBOX_SECRET, CHROMIUM, CLIENTS_DIR, EXAMPLES_DIR } = process.env;
const deadline = Date.now() + 45000;
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

// --- the page and xterm.js, from 127.0.0.1 ----------------------------------
const xtermDir = path.join(CLIENTS_DIR, 'node_modules', '@xterm', 'xterm');
const cdn = /https:\/\/cdn\.jsdelivr\.net\/npm\/@xterm\/xterm@[^/]+\//g;
const page = fs.readFileSync(path.join(EXAMPLES_DIR, 'terminal.html'), 'utf8');
if (!cdn.test(page)) await fail('terminal.html does not load xterm.js from the CDN URL this check rewrites');
const localPage = page.replace(cdn, '/xterm/');
const files = {
  '/terminal.html': ['text/html', localPage],
  '/xterm/lib/xterm.js': ['text/javascript', fs.readFileSync(path.join(xtermDir, 'lib', 'xterm.js'))],
  '/xterm/css/xterm.css': ['text/css', fs.readFileSync(path.join(xtermDir, 'css', 'xterm.css'))],
};
const server = http.createServer((req, res) => {
  const f = files[new URL(req.url, 'http://x').pathname];
  res.writeHead(f ? 200 : 404, { 'Content-Type': f ? f[0] : 'text/plain' });
  res.end(f ? f[1] : 'not found');
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
cleanups.push(() => new Promise((r) => server.close(r)));
const pageURL = `http://127.0.0.1:${server.address().port}/terminal.html#` +
  new URLSearchParams({ url: SANDBOX_URL, token: SANDBOX_SECRET, id: terminalID });

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
const cdp = new WebSocket(browserWS, { perMessageDeflate: false });
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
const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
const page$ = (method, params) => send(method, params, sessionId);
const evaluate = async (expression) => {
  const r = await page$('Runtime.evaluate', { expression, returnByValue: true });
  return r.result.value;
};
await page$('Page.enable');
await page$('Page.navigate', { url: pageURL });

async function waitFor(what, cond) {
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) {
      const status = await evaluate(`document.getElementById('status')?.textContent`).catch(() => '');
      await fail(`timed out waiting for ${what}; the page says: ${status}; screen:\n${await screen().catch(() => '')}`);
    }
    await sleep(50);
  }
}
// screen returns the text of xterm.js's buffer, line by line.
const screen = () => evaluate(`(() => {
  const b = window.sandboxTerminal.term.buffer.active, lines = [];
  for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
  return lines.join('\\n');
})()`);

await waitFor('the page to attach', () => evaluate(`window.sandboxTerminal?.state === 'attached'`));
await waitFor('the prompt', async () => /[$#] ?$/m.test(await screen()));
// Typed as a user types: text into xterm.js's focused textarea, then Enter.
await page$('Input.insertText', { text: 'echo $((6*7)) from-$((40+2))' });
const enter = { key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
await page$('Input.dispatchKeyEvent', { type: 'keyDown', text: '\r', ...enter });
await page$('Input.dispatchKeyEvent', { type: 'keyUp', ...enter });
const text = await waitFor('42 on the screen', async () => {
  const s = await screen();
  return /^42 from-42\s*$/m.test(s) && s;
});
await sleep(100); // one more frame painted for the screenshot
const shot = await page$('Page.captureScreenshot', { format: 'png' });
fs.mkdirSync(path.dirname(shotPath), { recursive: true });
fs.writeFileSync(shotPath, Buffer.from(shot.data, 'base64'));
const lines = text.split('\n').filter((l) => l.trim() !== '').length;
await send('Browser.close').catch(() => {});
await cleanup();
console.log(`${product}: the page attached with the subprotocol token, typed echo, and xterm.js shows "42 from-42" ` +
  `(${lines} lines on screen); screenshot ${shotPath}`);
