// Times MCP tool calls the way an agent makes them: the official TypeScript
// SDK client starts a server over stdio, makes one call to warm up (and, for
// airlock, to have its run approved), then N calls one after another, and
// prints one JSON line: each call's latency in ms and how many failed.
//
//   node bench.mjs N TOOL ARGS_JSON COMMAND [ARGS...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [n, tool, argsJSON, command, ...args] = process.argv.slice(2);
if (!command || !(Number(n) > 0)) {
  console.error("usage: node bench.mjs N TOOL ARGS_JSON COMMAND [ARGS...]");
  process.exit(2);
}
const toolArgs = JSON.parse(argsJSON);
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "airlock-bench", version: "1.0.0" });
await client.connect(transport);

const call = async () => {
  const res = await client.callTool({ name: tool, arguments: toolArgs }, undefined, { timeout: 120000 });
  if (res.isError) {
    throw new Error((res.content || []).map((c) => c.text ?? "").join("\n"));
  }
};
await call(); // warm-up: the first connection, and airlock's run approval
const lat = [];
let errors = 0;
let firstError = null;
for (let i = 0; i < Number(n); i++) {
  const t0 = performance.now();
  try {
    await call();
  } catch (e) {
    errors++;
    firstError ??= String(e.message ?? e);
  }
  lat.push(performance.now() - t0);
}
process.stdout.write(JSON.stringify({ lat_ms: lat, errors, first_error: firstError }) + "\n");
await client.close();
