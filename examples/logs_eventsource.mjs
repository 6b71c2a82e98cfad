// Follow a background process's logs with the npm `eventsource` package (v3+),
// which reconnects by itself when the connection drops and sends the id of
// the last event it got as Last-Event-ID. Every log event's id is its line
// number, so the agent resumes after that line: no line is lost or repeated.
//
//   (cd examples && npm ci)                 # once: eventsource, from package-lock.json
//   SANDBOX_SECRET=<secret> node examples/logs_eventsource.mjs PROCESS_ID
//
// SANDBOX_URL defaults to http://127.0.0.1:3030 (`make run`). Node.js 18+.
import { EventSource } from 'eventsource';

const baseUrl = process.env.SANDBOX_URL ?? 'http://127.0.0.1:3030';
const secret = process.env.SANDBOX_SECRET;
const processId = process.argv[2];
if (!secret || !processId) {
  console.error('usage: SANDBOX_SECRET=<secret> node logs_eventsource.mjs PROCESS_ID');
  process.exit(2);
}

const es = new EventSource(`${baseUrl}/process_logs_streaming?id=${encodeURIComponent(processId)}`, {
  // eventsource v3+ has no headers option: wrap fetch to add the token.
  // init.headers already holds Accept and, on a reconnect, Last-Event-ID.
  fetch: (url, init) => fetch(url, {
    ...init,
    headers: { ...init.headers, Authorization: `Bearer ${secret}` },
  }),
});

let lastId = 'none';
es.addEventListener('log', (e) => {
  const { stream, data } = JSON.parse(e.data);
  lastId = e.lastEventId;
  console.log(`[${stream}] ${data}`);
});
// Lines the agent had to drop (more than it keeps) before this client got them.
es.addEventListener('missed', (e) => console.error(`warning: ${JSON.parse(e.data).message}`));
// The process has ended and every line was sent: close, or EventSource would reconnect.
es.addEventListener('complete', () => es.close());
es.addEventListener('error', (e) => {
  if (e.data !== undefined) { // the agent's own error event, e.g. process not found
    console.error(JSON.parse(e.data).error);
    es.close();
    process.exitCode = 1;
  } else if (es.readyState === EventSource.CLOSED) { // e.g. 401: EventSource gives up
    console.error(`stream failed: ${e.message}`);
    process.exitCode = 1;
  } else { // the connection dropped: EventSource retries on its own (after 3 s)
    console.error(`connection lost (${e.message}); resuming after line ${lastId}`);
  }
});
