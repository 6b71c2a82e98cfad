// Drive a JavaScript code context with Node's fetch, as a notebook
// front-end does:
//
//   SANDBOX_SECRET=<secret> node examples/notebook_fetch.mjs
//
// SANDBOX_URL defaults to http://127.0.0.1:3030 (`make run`). Node 18+.
const base = process.env.SANDBOX_URL ?? 'http://127.0.0.1:3030';
const headers = { Authorization: `Bearer ${process.env.SANDBOX_SECRET}`, 'Content-Type': 'application/json' };

async function post(path, body) {
  const res = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body) });
  if (res.status >= 400) throw new Error(`${path}: ${res.status} ${(await res.json()).error}`);
  return res;
}

// cell runs code in the context and prints its events as they arrive.
async function cell(id, code) {
  console.log(`In [${code}]`);
  const res = await post('/run_code', { context: id, code });
  const decoder = new TextDecoder();
  let buf = '';
  let event = null;
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) {
        const data = JSON.parse(line.slice(6));
        if (event === 'stdout' || event === 'stderr') console.log(`  [${event}] ${JSON.stringify(data.data)}`);
        else if (event === 'result' || event === 'display') console.log(`  [${event}] ${data.data['text/plain']}`);
        else if (event === 'error') console.log(`  [error] ${data.name}: ${data.value}`);
        else if (event === 'complete') console.log(`  complete: ${data.status}, generation ${data.generation}`);
      }
    }
  }
}

const ctx = await (await post('/create_context', { language: 'javascript' })).json();
try {
  await cell(ctx.id, 'let y = 2');
  await cell(ctx.id, 'y * 21');
  await cell(ctx.id, "console.log('waiting'); new Promise(r => setTimeout(() => r('done'), 500))");
  await cell(ctx.id, 'undefinedThing()');
  await cell(ctx.id, 'y');
} finally {
  await post('/delete_context', { id: ctx.id });
}
