// The transport of a test script, from its arguments:
//   stdio BINARY [ARGS...]   (the environment is passed on)
//   http URL TOKEN           (Streamable HTTP with a run token)
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

export function transportFromArgs(script) {
  const [mode, ...rest] = process.argv.slice(2);
  if (mode === "stdio") {
    const [command, ...args] = rest;
    return new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
  }
  if (mode === "http") {
    const [url, token] = rest;
    return new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  }
  console.error(`usage: node ${script} stdio BINARY [ARGS...] | http URL TOKEN`);
  process.exit(2);
}
