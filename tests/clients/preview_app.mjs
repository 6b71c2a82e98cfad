// A small app for check_preview.sh: a page whose script is an absolute URL
// (under X-Forwarded-Prefix when the agent sends one, as apps behind a
// path-prefixing proxy do), the script, an event stream whose second event
// comes 1.5 s after the first, and a WebSocket echo (the npm ws package).
// It prints its port, then serves until it is killed.
import http from "node:http";
import { WebSocketServer } from "ws";

const server = http.createServer((req, res) => {
  const prefix = req.headers["x-forwarded-prefix"] ?? "";
  const path = new URL(req.url, "http://app").pathname;
  if (path === "/") {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><title>app</title><script src="${prefix}/static/app.js"></script>\n`);
  } else if (path === "/static/app.js") {
    res.writeHead(200, { "content-type": "text/javascript" });
    res.end('console.log("the asset");\n');
  } else if (path === "/events") {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write("data: one\n\n");
    setTimeout(() => res.end("data: two\n\n"), 1500);
  } else {
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("no such page\n");
  }
});
new WebSocketServer({ server, path: "/ws" }).on("connection", (ws) => {
  ws.on("message", (m) => ws.send(`echo: ${m}`));
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
