// A TCP relay that drops a connection mid-event, to make an EventSource
// reconnect: node relay.mjs TARGET_PORT CUT_BYTES
// It listens on a free loopback port, which it prints first, and relays each
// connection to 127.0.0.1:TARGET_PORT. On the first connection, in the first
// log event that starts CUT_BYTES or more into the reply, it relays the id,
// event and start of the data line, then destroys both sides: the client has
// the event's id line but not the event. For each connection it prints a
// JSON line: the request line, its Last-Event-ID header (null if none), the
// first event id of the reply, and the id of the event it cut (null if
// none). It exits by itself after 60 s.
import net from 'node:net';

const [targetPort, cutBytes] = process.argv.slice(2).map(Number);
let conns = 0;

const server = net.createServer((client) => {
  const n = ++conns;
  const info = { conn: n, request: null, lastEventId: null, firstId: null, cutId: null };
  let head = '';
  let reply = ''; // what was relayed of the reply (latin1: one char a byte), until a cut

  const upstream = net.connect(targetPort, '127.0.0.1');
  const report = () => {
    if (!info.reported) {
      info.reported = true;
      const { reported, ...line } = info;
      console.log(JSON.stringify(line));
    }
  };

  client.on('data', (chunk) => {
    if (info.request === null) {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end >= 0) {
        const lines = head.slice(0, end).split('\r\n');
        info.request = lines[0];
        const h = lines.find((l) => /^last-event-id:/i.test(l));
        info.lastEventId = h ? h.slice(h.indexOf(':') + 1).trim() : null;
      }
    }
    upstream.write(chunk);
  });
  upstream.on('data', (chunk) => {
    const sent = reply.length;
    if (n === 1 || info.firstId === null) reply += chunk.toString('latin1');
    if (info.firstId === null) {
      const m = /(?:^|\n)id: (\d+)\n/.exec(reply);
      if (m) info.firstId = m[1];
    }
    if (n === 1 && reply.length >= cutBytes) {
      const re = /id: (\d+)\nevent: log\ndata: /g;
      re.lastIndex = cutBytes;
      const m = re.exec(reply);
      if (m) {
        const cutAt = m.index + m[0].length + 5; // a few bytes into the event's JSON
        if (cutAt > sent && cutAt <= reply.length) {
          client.write(chunk.subarray(0, cutAt - sent));
          info.cutId = m[1];
          report();
          client.destroy();
          upstream.destroy();
          return;
        }
      }
    }
    client.write(chunk);
  });
  const close = () => { report(); client.destroy(); upstream.destroy(); };
  client.on('close', close);
  upstream.on('close', close);
  client.on('error', () => {});
  upstream.on('error', () => {});
});

server.listen(0, '127.0.0.1', () => console.log(server.address().port));
setTimeout(() => process.exit(0), 60_000).unref();
setTimeout(() => server.close(), 60_000);
