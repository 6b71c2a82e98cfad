// Follow a background process's logs with fetch and a stream reader: the API
// document's JavaScript example. Node.js 18+ (global fetch); no package needed.
//
//   SANDBOX_SECRET=<secret> node examples/logs_fetch.mjs PROCESS_ID
//
// SANDBOX_URL defaults to http://127.0.0.1:3030 (`make run`). Prints
// "[stdout] line" or "[stderr] line" for every line, retained ones first, and
// returns when the process has ended. ": ping" comments on idle streams are
// skipped like every line that does not start with "data: ".
const baseUrl = process.env.SANDBOX_URL ?? 'http://127.0.0.1:3030';
const secret = process.env.SANDBOX_SECRET;
const processId = process.argv[2];
if (!secret || !processId) {
  console.error('usage: SANDBOX_SECRET=<secret> node logs_fetch.mjs PROCESS_ID');
  process.exit(2);
}

const response = await fetch(`${baseUrl}/process_logs_streaming?id=${encodeURIComponent(processId)}`, {
  method: 'GET',
  headers: {
    'Authorization': `Bearer ${secret}`,
  }
});
if (!response.ok) { // not in the document: a wrong secret gives 401
  throw new Error(`HTTP ${response.status}: ${await response.text()}`);
}

const reader = response.body.getReader();
const decoder = new TextDecoder();
// Two fixes to the document's loop: a chunk can end in the middle of a line,
// so the unfinished last line is kept for the next chunk; and in the middle
// of a character, so the decoder is told more is coming ({ stream: true }).
let rest = '';

while (true) {
  const { done, value } = await reader.read();
  if (done) break;

  const text = rest + decoder.decode(value, { stream: true });
  const lines = text.split('\n');
  rest = lines.pop();

  for (const line of lines) {
    if (line.startsWith('data: ')) {
      const data = JSON.parse(line.substring(6));
      if (data.stream) {
        console.log(`[${data.stream}] ${data.data}`);
      } else if (data.error) { // not in the document: e.g. process not found
        console.error(data.error);
        process.exit(1);
      }
    }
  }
}
