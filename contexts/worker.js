// The Node worker of a code context: the agent starts it as
// `node -e <this file>` with two pipes on file descriptors 3 (frames from
// the agent) and 4 (frames to the agent). A frame is a 4-byte big-endian
// length and that many bytes of JSON. The user's code writes to file
// descriptors 1 and 2 as it likes: nothing it prints can forge a frame.
// Built-in modules only; Node 18+.
//
// Everything is inside one function: the cells run as scripts in this
// same context (vm's runInThisContext), where top-level declarations of
// the worker's would be the code's too (a cell's `const fs` would be
// "already declared", and its `counts = 0` would forge the frame counts).
// Only display (and, from node -e, require) are global.
(function worker() {
'use strict';
const fs = require('fs');
const net = require('net');
const util = require('util');
const vm = require('vm');

// The frame pipes move off 3 and 4: opening them again through /proc gives
// descriptors that libuv makes close-on-exec, so no child holds them.
const rfd = fs.openSync('/proc/self/fd/3', 'r');
const wfd = fs.openSync('/proc/self/fd/4', 'w');
fs.closeSync(3);
fs.closeSync(4);

let maxOutput = 8 << 20;
const counts = [0, 0];
let running = null; // the running cell: {interrupt(err)}

function send(msg) {
  // Every frame says how much the worker had written to stdout and stderr
  // before it, so that the agent sends the events in that order.
  msg.stdout = counts[0];
  msg.stderr = counts[1];
  const body = Buffer.from(JSON.stringify(msg), 'utf8');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  const data = Buffer.concat([head, body]);
  let off = 0;
  while (off < data.length) {
    try {
      off += fs.writeSync(wfd, data, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

// stdout and stderr: every write reaches the pipe at once, counted, so
// that the agent knows when it has read all of a cell's output.
function writer(fd, i) {
  return function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') { cb = encoding; encoding = undefined; }
    const b = typeof chunk === 'string' ? Buffer.from(chunk, encoding || 'utf8') : Buffer.from(chunk);
    let off = 0;
    while (off < b.length) {
      try {
        const n = fs.writeSync(fd, b, off);
        off += n;
        counts[i] += n;
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e;
      }
    }
    if (cb) process.nextTick(cb);
    return true;
  };
}
process.stdout.write = writer(1, 0);
process.stderr.write = writer(2, 1);

function bundle(obj) {
  const data = { 'text/plain': util.inspect(obj) };
  if (obj && typeof obj === 'object') {
    for (const [meth, mime] of [['_repr_html_', 'text/html'], ['_repr_svg_', 'image/svg+xml'],
      ['_repr_png_', 'image/png'], ['_repr_json_', 'application/json']]) {
      if (typeof obj[meth] !== 'function') continue;
      try {
        let v = obj[meth]();
        if (v == null) continue;
        if (Buffer.isBuffer(v) || v instanceof Uint8Array) v = Buffer.from(v).toString('base64');
        data[mime] = v;
      } catch (e) { /* a broken repr is left out */ }
    }
  }
  return data;
}

function emit(type, data) {
  let size = 0;
  const sizeOf = (v) => (typeof v === 'string' ? v.length : JSON.stringify(v).length);
  for (const v of Object.values(data)) size += sizeOf(v);
  let truncated = false;
  if (size > maxOutput) {
    truncated = true;
    const rich = Object.keys(data).filter((m) => m !== 'text/plain').sort((a, b) => sizeOf(data[b]) - sizeOf(data[a]));
    for (const m of rich) {
      if (size <= maxOutput) break;
      size -= sizeOf(data[m]);
      delete data[m];
    }
    if (size > maxOutput) data['text/plain'] = data['text/plain'].slice(0, maxOutput >> 2);
  }
  const msg = { type, data };
  if (truncated) msg.truncated = true;
  send(msg);
}

globalThis.display = (...objs) => { for (const o of objs) emit('display', bundle(o)); };

function sendError(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    send({ type: 'error', name: String(e.name || 'Error'), value: String(e.message || ''),
      traceback: String(e.stack || '').split('\n') });
  } else {
    send({ type: 'error', name: 'Uncaught', value: util.inspect(e), traceback: [] });
  }
}

// An exception or rejection that escapes a cell later (a timer's) is
// reported in the running cell, if any, else on stderr; it never ends the
// worker.
process.on('uncaughtException', (e) => {
  if (running) sendError(e); else process.stderr.write('Uncaught ' + util.inspect(e) + '\n');
});
process.on('unhandledRejection', (e) => {
  if (running) sendError(e); else process.stderr.write('Unhandled rejection ' + util.inspect(e) + '\n');
});
// SIGINT interrupts the running cell: its synchronous part through
// breakOnSigint, the promise it waits for here.
process.on('SIGINT', () => { if (running) running.interrupt(); });

class Interrupted extends Error {
  constructor() { super('Script execution interrupted.'); this.name = 'Interrupted'; }
}

async function runCell(code, count) {
  let interrupt;
  const interrupted = new Promise((resolve, reject) => { interrupt = () => reject(new Interrupted()); });
  interrupted.catch(() => {});
  running = { interrupt };
  try {
    const script = new vm.Script(code, { filename: 'cell-' + count });
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') value = await Promise.race([value, interrupted]);
    if (value !== undefined) {
      globalThis._ = value;
      emit('result', bundle(value));
    }
    return 'ok';
  } catch (e) {
    const isInterrupt = e instanceof Interrupted ||
      (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED');
    if (isInterrupt) send({ type: 'error', name: 'Interrupted', value: 'Script execution interrupted.', traceback: [] });
    else sendError(e);
    return isInterrupt ? 'interrupted' : 'error';
  } finally {
    running = null;
  }
}

const input = new net.Socket({ fd: rfd, readable: true, writable: false });
let pending = Buffer.alloc(0);
let queue = Promise.resolve();
input.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4) {
    const n = pending.readUInt32BE(0);
    if (pending.length < 4 + n) break;
    const msg = JSON.parse(pending.subarray(4, 4 + n).toString('utf8'));
    pending = pending.subarray(4 + n);
    if (msg.type !== 'execute') continue;
    if (msg.max_output) maxOutput = msg.max_output;
    queue = queue.then(async () => {
      const status = await runCell(msg.code || '', msg.count || 0);
      send({ type: 'done', count: msg.count || 0, status });
    });
  }
});
input.on('end', () => process.exit(0));
send({ type: 'ready', pid: process.pid });
})();
