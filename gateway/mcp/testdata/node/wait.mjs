// A host that gives a tool call the TypeScript SDK's default request
// timeout (60 s) and passes no wait_s: ssh_exec must answer before the
// host gives up, with the action still waiting for its reviewer, and the
// action must outlive the call. One JSON line per step, for the Go test
// that runs it (and approves the call once "cancelled_after_answer" is
// printed).
//
//   node wait.mjs stdio AIRLOCK_BINARY [ARGS...]   (airlock mcp; the environment is passed on)
//   node wait.mjs http URL TOKEN                   (Streamable HTTP with a run token)
//
// Target "box-call" (call approval) must exist; the gateway's mcp.max_wait
// should be a few seconds so that the test does not take a minute.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { transportFromArgs } from "./transport.mjs";

const transport = transportFromArgs("wait.mjs");

// The JSON-RPC id of the last tools/call sent, to cancel it as the SDK
// does when its timeout fires.
let lastCallId = null;
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  if (message.method === "tools/call") lastCallId = message.id;
  return send(message, options);
};

const out = (step, data) => process.stdout.write(JSON.stringify({ step, ...data }) + "\n");
const text = (res) => (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const call = async (name, args) => {
  try {
    // No options: the SDK's default request timeout, as hosts use it.
    const res = await client.callTool({ name, arguments: args });
    return { isError: res.isError === true, structured: res.structuredContent ?? null, text: text(res) };
  } catch (e) {
    return { thrown: true, code: e.code ?? null, message: String(e.message ?? e) };
  }
};

const client = new Client({ name: "airlock-wait-test", version: "1.0.0" });
await client.connect(transport);
// Listing the tools makes the SDK validate structured content against
// each tool's output schema.
await client.listTools();

const held = await call("ssh_exec", { target: "box-call", command: "echo waited-for-a-human" });
out("held", held);

// What the SDK sends when its timeout fires: here after the answer.
await client.notification({ method: "notifications/cancelled", params: { requestId: lastCallId, reason: "Request timed out" } });
out("cancelled_after_answer", { requestId: lastCallId });

let followed = null;
for (let i = 0; i < 20; i++) {
  followed = await call("get_action", { action_id: held.structured?.id ?? "act_missing", wait_s: 30 });
  if (followed.thrown || followed.structured?.outcome) break;
}
out("followed", followed);

await client.close();
out("closed", {});
