// The client side of check_preview.sh: through the agent's preview proxy,
// by path (/proxy/PORT/, with the token) and by host name (PORT-preview,
// a public exposed port, no token), it loads the page, then the asset the
// page names by absolute URL, reads the event stream (the first event must
// come before the stream ends) and echoes a message over a WebSocket (the
// npm ws package). Usage: node preview_client.mjs AGENT_URL SECRET PORT
import http from "node:http";
import WebSocket from "ws";

const [agentURL, secret, port] = process.argv.slice(2);
const agent = new URL(agentURL);

function get(path, headers) {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const req = http.get({ host: agent.hostname, port: agent.port, path, headers, timeout: 10000 }, (res) => {
      const chunks = [];
      res.setEncoding("utf8");
      res.on("data", (c) => chunks.push({ at: performance.now() - start, text: c }));
      res.on("end", () => resolve({ status: res.statusCode, chunks, body: chunks.map((c) => c.text).join(""),
        ended: performance.now() - start }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path}: timed out`)));
    req.on("error", reject);
  });
}

function echo(path, headers) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${agent.host}${path}`, { headers, handshakeTimeout: 10000 });
    ws.on("open", () => ws.send("hi"));
    ws.on("message", (m) => { ws.close(); resolve(String(m)); });
    ws.on("error", reject);
  });
}

function must(cond, what) {
  if (!cond) throw new Error(what);
}

const modes = {
  path: { prefix: `/proxy/${port}`, headers: { authorization: `Bearer ${secret}` } },
  host: { prefix: "", headers: { host: `${port}-preview.localhost` } },
};
const summary = [];
for (const [mode, { prefix, headers }] of Object.entries(modes)) {
  const page = await get(`${prefix}/`, headers);
  must(page.status === 200, `${mode}: the page is ${page.status}`);
  const src = page.body.match(/src="([^"]+)"/)?.[1];
  must(src === `${prefix}/static/app.js`, `${mode}: the page names its asset ${src}`);
  const asset = await get(src, headers); // the absolute URL, as a browser resolves it
  must(asset.status === 200 && asset.body.includes("the asset"), `${mode}: the asset is ${asset.status} ${asset.body}`);
  const missing = await get(`${prefix}/missing`, headers);
  must(missing.status === 404 && missing.body === "no such page\n", `${mode}: the app's 404 is ${missing.status}`);

  const events = await get(`${prefix}/events`, headers);
  const first = events.chunks.find((c) => c.text.includes("data: one"));
  must(events.status === 200 && first, `${mode}: no first event in ${JSON.stringify(events.body)}`);
  must(events.body.includes("data: two"), `${mode}: no second event`);
  must(first.at < 1000 && events.ended - first.at > 1000,
    `${mode}: first event at ${first.at.toFixed(0)} ms, end at ${events.ended.toFixed(0)} ms: it was not streamed`);

  const reply = await echo(`${prefix}/ws`, headers);
  must(reply === "echo: hi", `${mode}: the WebSocket echoed ${reply}`);
  summary.push(`by ${mode}: page, asset, app's 404, first event at ${first.at.toFixed(0)} ms of ${events.ended.toFixed(0)}, ws echo`);
}
console.log(summary.join("; "));
