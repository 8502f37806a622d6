// A client no one on the project wrote: the official TypeScript SDK drives
// airlock's MCP tools and prints one JSON line per step for the Go test that
// runs it (and approves what it asks for meanwhile).
//
//   node client.mjs stdio AIRLOCK_BINARY [ARGS...]   (airlock mcp; the environment is passed on)
//   node client.mjs http URL TOKEN                   (Streamable HTTP with a run token)
//
// Targets: "box-run" (run approval) must exist; the Go test approves the run.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { transportFromArgs } from "./transport.mjs";

const transport = transportFromArgs("client.mjs");

const out = (step, data) => process.stdout.write(JSON.stringify({ step, ...data }) + "\n");
const text = (res) => (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const call = async (name, args, opts = {}) => {
  try {
    const res = await client.callTool({ name, arguments: args }, undefined, { timeout: 60000, ...opts });
    return { isError: res.isError === true, structured: res.structuredContent ?? null, text: text(res) };
  } catch (e) {
    return { thrown: true, code: e.code ?? null, message: String(e.message ?? e) };
  }
};

const client = new Client({ name: "airlock-interop-test", version: "1.0.0" });
await client.connect(transport);
out("connected", { server: client.getServerVersion(), protocol: transport.protocolVersion ?? null });

const { tools } = await client.listTools();
out("tools", { names: tools.map((t) => t.name).sort(), outputSchemas: tools.filter((t) => t.outputSchema).length });

out("list_targets", await call("list_targets", {}));

const progress = [];
const exec = await call("ssh_exec", { target: "box-run", command: "echo hello-from-typescript; echo to-stderr >&2" }, {
  onprogress: (p) => progress.push(p.message ?? ""),
  resetTimeoutOnProgress: true,
});
out("exec", { ...exec, progress });

out("exec_failing", await call("ssh_exec", { target: "box-run", command: "exit 3" }));

out("get_action", await call("get_action", { action_id: exec.structured?.id ?? "act_missing" }));

// Standard input as text, and a reason for the reviewer.
out("exec_stdin", await call("ssh_exec", {
  target: "box-run", command: "cat", stdin: "from-typescript\nline 2\n", reason: "checking that stdin arrives",
}));

// Long output comes sized for a model; get_action pages the rest.
const big = await call("ssh_exec", { target: "box-run", command: "seq 1 200000" });
out("exec_big", big);
out("page", await call("get_action", {
  action_id: big.structured?.id ?? "act_missing", stream: "stdout", offset: (big.structured?.stdout ?? "").length, limit: 1000,
}));

// With wait_s the call returns while the action goes on; get_action's
// wait_s follows it to its end.
const early = await call("ssh_exec", { target: "box-run", command: "sleep 2; echo late", wait_s: 1 });
out("exec_wait", early);
let followed = null;
for (let i = 0; i < 20; i++) {
  followed = await call("get_action", { action_id: early.structured?.id ?? "act_missing", wait_s: 30 });
  if (followed.thrown || followed.structured?.outcome) break;
}
out("followed", followed);

out("bad_arguments", await call("ssh_exec", { target: "box-run", timeout_s: "ten" }));
out("bad_timeout", await call("ssh_exec", { target: "box-run", command: "true", timeout_s: 0 }));

out("unknown_tool", await call("ssh_shell", { host: "10.0.0.1", command: "true" }));

await client.close();
out("closed", {});
