// A TCP relay to the agent that a check can cut, as a network drops a
// connection (no close handshake: the WebSocket client sees 1006), and hold
// down, so that reconnections fail until it is up again. Used by
// doc_terminal.mjs and browser_terminal.mjs.
import net from 'node:net';

// startRelay listens on a free loopback port and relays each connection to
// the host and port of targetURL. It returns { url, down, accepted, cut(),
// close() }: url is the relay's http:// URL; while down is true, new
// connections are closed at once; cut() closes every relayed connection.
export async function startRelay(targetURL) {
  const target = new URL(targetURL);
  const socks = new Set();
  const relay = { url: null, down: false, accepted: 0 };
  const server = net.createServer((client) => {
    if (relay.down) {
      client.destroy();
      return;
    }
    relay.accepted++;
    const upstream = net.connect(Number(target.port), target.hostname);
    socks.add(client);
    socks.add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      socks.delete(client);
      socks.delete(upstream);
    };
    client.on('close', close);
    upstream.on('close', close);
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${server.address().port}`;
  relay.cut = () => { for (const s of socks) s.destroy(); };
  relay.close = () => {
    relay.cut();
    return new Promise((resolve) => server.close(resolve));
  };
  return relay;
}

// The eviction scenario both checks play: a terminal prints part one, waits
// for a line while the client is cut off, then prints part two, more than
// the agent's 1 MiB ring, so that a resume from the end of part one finds
// part of what follows evicted.
export const evictionCmd = 'read x; seq 1 20000; read y; seq 20001 300000';
export const ringBytes = 1 << 20; // the agent's default, which run.sh keeps

// evictionOutput returns the terminal's output, as a Buffer, when the first
// line typed is first (echoed, as every typed line, with \r\n) and the
// second an empty one; and the length of part one, up to the second read.
export function evictionOutput(first) {
  const seq = (from, to) => {
    let s = '';
    for (let i = from; i <= to; i++) s += i + '\r\n';
    return s;
  };
  const one = first + '\r\n' + seq(1, 20000);
  return { want: Buffer.from(one + '\r\n' + seq(20001, 300000), 'latin1'), partOne: one.length };
}

// waitEnded polls /list_terminals until terminal id has ended, for at most
// ms.
export async function waitEnded(base, secret, id, ms = 20000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const r = await fetch(`${base}/list_terminals`, { headers: { Authorization: `Bearer ${secret}` } });
    const t = (await r.json()).terminals.find((t) => t.id === id);
    if (t && t.status !== 'running') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`terminal ${id} did not end within ${ms} ms`);
}
