// The official MCP TypeScript SDK's client against the agent: over its
// Streamable HTTP transport to /mcp (mode "http"), or over its stdio
// transport through `sandbox-executor mcp` (mode "stdio").
// Usage: node mcp_client.mjs http|stdio PROCESS_ID
// (SANDBOX_URL, SANDBOX_SECRET and, for stdio, BIN in the environment).
// PROCESS_ID is a background process for process_kill to end.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import Ajv2020 from "ajv/dist/2020.js";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [mode, processId] = process.argv.slice(2);
const url = process.env.SANDBOX_URL;

function transport(token) {
  if (mode === "stdio") {
    return new StdioClientTransport({
      command: process.env.BIN,
      args: ["mcp", "-url", url],
      env: { SANDBOX_SECRET: token, PATH: process.env.PATH },
      stderr: "inherit",
    });
  }
  return new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL: ${what}`);
    process.exit(1);
  }
}

const client = new Client({ name: "ts-sdk-check", version: "1.0.0" });
await client.connect(transport(process.env.SANDBOX_SECRET));

const { tools } = await client.listTools();
const ajv = new Ajv2020({ strict: false });
for (const t of tools) {
  check(t.inputSchema.type === "object" && t.inputSchema.properties && Array.isArray(t.inputSchema.required),
    `${t.name}'s input schema is an object schema`);
  ajv.compile(t.inputSchema); // throws if it is not a valid JSON Schema 2020-12
}

const text = (r) => r.content.map((c) => c.text).join("");
// exec and exec_poll: /run with yield_ms and /poll_process.
let e = await client.callTool({ name: "exec", arguments: { cmd: "echo hi" } });
check(!e.isError && e.structuredContent.status === "exited" && e.structuredContent.exit_code === 0 &&
  e.structuredContent.output === "hi\n", `exec echo hi: ${JSON.stringify(e)}`);
e = await client.callTool({ name: "exec", arguments: { cmd: "sleep 3; echo done", yield_ms: 500 } });
check(e.structuredContent.status === "running" && e.structuredContent.process_id, `exec that yields: ${JSON.stringify(e)}`);
const execId = e.structuredContent.process_id;
for (let i = 0; i < 10 && e.structuredContent.status === "running"; i++) {
  e = await client.callTool({ name: "exec_poll", arguments: { process_id: execId, yield_ms: 1000 } });
}
check(e.structuredContent.status === "exited" && e.structuredContent.exit_code === 0 && e.structuredContent.output === "done\n",
  `exec_poll until done: ${JSON.stringify(e)}`);
const dir = mkdtempSync(join(tmpdir(), "mcp-ts-"));
const path = join(dir, "notes.txt");
let r = await client.callTool({ name: "write_file", arguments: { path, content: "a\nb\nc\nd\ne\n" } });
check(!r.isError, `write_file: ${text(r)}`);
r = await client.callTool({ name: "read_file", arguments: { path, offset: 2, limit: 3 } });
check(!r.isError && r.structuredContent.content === "b\nc\nd\n" && r.structuredContent.next_offset === 5,
  `read_file with a line range: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "read_file", arguments: { path: join(dir, "missing") } });
check(r.isError === true, `read_file of a missing file is an isError result: ${JSON.stringify(r)}`);
// edit_file: an ambiguous edit is refused with isError and changes
// nothing; a unique one is made.
await client.callTool({ name: "write_file", arguments: { path: join(dir, "a.py"), content: "x = 1\ny = 2\nx = 1\n" } });
r = await client.callTool({ name: "edit_file", arguments: { path: join(dir, "a.py"), old: "x = 1", new: "x = 3" } });
check(r.isError === true && text(r).includes("found 2 times") && r.structuredContent.lines.join() === "1,3",
  `edit_file refuses an ambiguous edit with isError: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "read_file", arguments: { path: join(dir, "a.py") } });
check(r.structuredContent.content === "x = 1\ny = 2\nx = 1\n", `the refused edit wrote nothing: ${text(r)}`);
r = await client.callTool({ name: "edit_file", arguments: { path: join(dir, "a.py"), old: "y = 2", new: "y = 20" } });
check(!r.isError && r.structuredContent.replacements === 1 && text(r).includes("+y = 20"), `edit_file: ${text(r)}`);
r = await client.callTool({ name: "apply_patch", arguments: { cwd: dir,
  patch: "*** Begin Patch\n*** Update File: a.py\n@@\n-y = 20\n+y = 21\n*** Add File: b.py\n+z = 1\n*** End Patch\n" } });
check(!r.isError && r.structuredContent.files.length === 2, `apply_patch: ${text(r)}`);
// grep cut by max_results names the cursor; passing it back goes on.
r = await client.callTool({ name: "grep", arguments: { pattern: "= 1", path: dir, max_results: 1 } });
check(!r.isError && r.structuredContent.truncated && text(r).includes(`"cursor": "${r.structuredContent.cursor}"`),
  `grep cut by max_results names its cursor: ${text(r)}`);
const at = (m) => `${m.path}:${m.line}`;
const first = at(r.structuredContent.matches[0]);
r = await client.callTool({ name: "grep", arguments: { pattern: "= 1", path: dir, max_results: 1, cursor: r.structuredContent.cursor } });
check(!r.isError && r.structuredContent.matches.length === 1 && at(r.structuredContent.matches[0]) !== first,
  `grep with the cursor goes on: ${text(r)}`);
r = await client.callTool({ name: "find_files", arguments: { path: dir, glob: "*.py" } });
check(!r.isError && r.structuredContent.entries.length === 2, `find_files: ${text(r)}`);
// exec keeps stdin open: exec_poll's input answers a prompt.
e = await client.callTool({ name: "exec", arguments: { cmd: "printf 'name? '; read x; echo got $x", yield_ms: 300 } });
check(e.structuredContent.status === "running" && e.structuredContent.output === "name? ", `exec at a prompt: ${JSON.stringify(e)}`);
e = await client.callTool({ name: "exec_poll", arguments: { process_id: e.structuredContent.process_id, input: "hi\n", yield_ms: 5000 } });
check(e.structuredContent.status === "exited" && e.structuredContent.output === "got hi\n", `exec_poll input: ${JSON.stringify(e)}`);
r = await client.callTool({ name: "run_code", arguments: { code: "print('hi')\n6*7" } });
check(!r.isError && r.structuredContent.output === "hi\n" && r.structuredContent.result === "42", `run_code: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "wait_for_port", arguments: { port: Number(new URL(url).port), timeout: 5 } });
check(!r.isError && r.structuredContent.ready === true, `wait_for_port on the agent's own port: ${text(r)}`);
r = await client.callTool({ name: "list_dir", arguments: { path: dir } });
check(!r.isError && r.structuredContent.entries.some((e) => e.name === "notes.txt"), `list_dir: ${text(r)}`);
r = await client.callTool({ name: "process_kill", arguments: { process_id: processId } });
check(!r.isError, `process_kill: ${text(r)}`);
r = await client.callTool({ name: "process_list", arguments: {} });
const killed = r.structuredContent.processes.find((p) => p.id === processId);
check(killed && killed.status !== "running", `process_list after process_kill: ${text(r)}`);
let unknown = null;
try {
  await client.callTool({ name: "no_such_tool", arguments: {} });
} catch (e) {
  unknown = e;
}
check(unknown && String(unknown.message).includes("unknown tool"), `an unknown tool is a protocol error: ${unknown}`);
await client.close();

// A wrong token: the client reports the 401.
const bad = new Client({ name: "ts-sdk-check", version: "1.0.0" });
let refused = null;
try {
  await bad.connect(transport("wrong-token"));
  await bad.listTools();
} catch (e) {
  refused = e;
}
await bad.close().catch(() => {});
// Over HTTP the SDK's error carries the status as its code; through the
// forwarder, the JSON-RPC error's message names it.
check(refused && (refused.code === 401 || String(refused.message).includes("401")),
  `a wrong token is reported as 401: ${refused}`);

console.log(`${mode}: ${tools.length} tools with valid schemas; exec, exec with yield_ms then exec_poll, write_file, read_file lines 2-4, ` +
  `edit_file refusing an ambiguous edit with isError, edit_file, apply_patch, grep cut then resumed by its cursor, find_files, ` +
  `exec_poll input to a prompt, run_code, wait_for_port, list_dir, process_kill, an unknown tool refused; a wrong token refused with 401`);
