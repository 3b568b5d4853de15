// SPDX-License-Identifier: MIT
// MCP client scenarios for tests/integration/test_mcp.py: each connects to paddock's /mcp
// with the official TypeScript SDK, does what a client does, and prints what it saw as one
// JSON object. The test asserts on it.
//
// usage: node scenarios.mjs SCENARIO URL [TOKEN]

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [scenario, url, token] = process.argv.slice(2);

async function connect(name = "paddock-tests", withToken = true) {
  const headers = withToken && token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

// A tool call's result as plain data, with the time it took.
async function call(client, name, args, options = {}) {
  const t0 = performance.now();
  try {
    const r = await client.callTool({ name, arguments: args }, undefined, options);
    return { ms: performance.now() - t0, content: r.content, isError: r.isError === true };
  } catch (e) {
    return { ms: performance.now() - t0, thrown: String(e), code: e.code ?? null };
  }
}

const texts = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text);

const scenarios = {
  // Everything a session offers, in one connection, ended with DELETE.
  async basic() {
    const { client, transport } = await connect();
    const out = {
      sessionId: transport.sessionId,
      protocolVersion: transport.protocolVersion ?? null,
      server: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      instructions: client.getInstructions(),
    };
    out.tools = (await client.listTools()).tools;
    out.ping = await client.ping();
    out.set = await call(client, "code_execution", { code: "x = 41\nprint('set')" });
    out.get = await call(client, "code_execution", { code: "x + 1" });
    out.bash = await call(client, "bash_code_execution", { command: "cd /tmp && export V=kept && echo $PWD" });
    out.bash2 = await call(client, "bash_code_execution", { command: "echo $PWD $V" });
    out.bashFail = await call(client, "bash_code_execution", { command: "echo to-stdout; echo to-stderr >&2; false" });
    out.pyFail = await call(client, "code_execution", { code: "import sys\nprint('before')\nraise ValueError('bad value')" });
    out.missingArg = await call(client, "code_execution", {});
    out.create = await call(client, "text_editor_code_execution", { command: "create", path: "notes/a.txt", file_text: "one\ntwo\n" });
    out.replace = await call(client, "text_editor_code_execution", { command: "str_replace", path: "notes/a.txt", old_str: "two", new_str: "three" });
    out.view = await call(client, "text_editor_code_execution", { command: "view", path: "notes/a.txt" });
    out.undo = await call(client, "text_editor_code_execution", { command: "undo_edit", path: "notes/a.txt" });
    out.viewAfterUndo = await call(client, "text_editor_code_execution", { command: "view", path: "notes/a.txt" });
    out.editorBad = await call(client, "text_editor_code_execution", { command: "str_replace", path: "notes/a.txt", old_str: "absent", new_str: "x" });
    out.writeText = await call(client, "write_file", { path: "up/hello.txt", content: "héllo\n" });
    out.readText = await call(client, "read_file", { path: "up/hello.txt" });
    const bytes = Buffer.from([0, 1, 2, 253, 254, 255, 10, 13]);
    out.sentBlob = bytes.toString("base64");
    out.writeBlob = await call(client, "write_file", { path: "up/data.bin", content: out.sentBlob, encoding: "base64" });
    out.readBlob = await call(client, "read_file", { path: "up/data.bin" });
    out.pyReadsBlob = await call(client, "code_execution", { code: "print(list(open('/workspace/up/data.bin','rb').read()))" });
    out.badBase64 = await call(client, "write_file", { path: "up/x.bin", content: "not base64!", encoding: "base64" });
    out.list = await call(client, "list_files", { path: "up" });
    out.readMissing = await call(client, "read_file", { path: "up/missing.txt" });
    out.readOutside = await call(client, "read_file", { path: "../../etc/passwd" });
    out.unknownTool = await call(client, "no_such_tool", {});
    await transport.terminateSession();
    out.afterDelete = await call(client, "code_execution", { code: "1" });
    await client.close();
    return out;
  },

  // A figure shown with plt.show() comes back as an image; a PNG file read back is one too.
  async image() {
    const { client, transport } = await connect();
    const out = {};
    out.plot = await call(client, "code_execution", {
      code: "import matplotlib\nimport matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()\nprint('drawn')",
    });
    out.save = await call(client, "code_execution", {
      code: "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('/workspace/fig.png')\nplt.close()",
    });
    out.readPng = await call(client, "read_file", { path: "fig.png" });
    await transport.terminateSession();
    await client.close();
    return out;
  },

  // Output arrives as progress notifications while the call runs.
  async progress() {
    const { client, transport } = await connect();
    const events = [];
    const t0 = performance.now();
    const r = await call(
      client,
      "code_execution",
      { code: "import time, sys\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('err', file=sys.stderr, flush=True)\nprint('last')" },
      { onprogress: (p) => events.push({ t: performance.now() - t0, ...p }) },
    );
    const bash = [];
    const t1 = performance.now();
    const rb = await call(
      client,
      "bash_code_execution",
      { command: "echo one; sleep 1; echo two" },
      { onprogress: (p) => bash.push({ t: performance.now() - t1, ...p }) },
    );
    await transport.terminateSession();
    await client.close();
    return { events, result: r, bashEvents: bash, bashResult: rb };
  },

  // A cancelled call is interrupted; the session keeps its state and takes the next call.
  async cancel() {
    const { client, transport } = await connect();
    const out = {};
    out.before = await call(client, "code_execution", { code: "kept = 'yes'" });
    const ac = new AbortController();
    let started;
    const progressed = new Promise((resolve) => (started = resolve));
    const t0 = performance.now();
    const pending = call(
      client,
      "code_execution",
      { code: "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\nprint('woke')", timeout_seconds: 120 },
      { signal: ac.signal, onprogress: () => started() },
    );
    await progressed;
    ac.abort("changed my mind");
    out.cancelled = await pending;
    // The interrupt takes a moment: the session answers "busy" until it is done.
    const deadline = performance.now() + 20000;
    for (;;) {
      const r = await call(client, "code_execution", { code: "print(kept)" });
      if (!r.isError || performance.now() > deadline) {
        out.after = r;
        break;
      }
      out.busySeen = (out.busySeen || 0) + 1;
      await new Promise((res) => setTimeout(res, 50));
    }
    out.sinceCancelMs = performance.now() - t0;
    await transport.terminateSession();
    await client.close();
    return out;
  },

  // Two MCP sessions are two sandboxes: no variable, file or process of one in the other.
  async isolation() {
    const a = await connect("a");
    const b = await connect("b");
    const out = { a: a.transport.sessionId, b: b.transport.sessionId };
    out.aSet = await call(a.client, "code_execution", { code: "secret = 'A-only'\nopen('/workspace/a-secret.txt','w').write('A file')\nimport os\nprint(os.getpid())" });
    out.aSleeper = await call(a.client, "bash_code_execution", { command: "(sleep 300 &) ; echo started" });
    out.bVar = await call(b.client, "code_execution", { code: "print('secret' in globals())" });
    out.bRead = await call(b.client, "read_file", { path: "a-secret.txt" });
    const find = "ls -a /workspace; ps -eo args | grep -c '[s]leep 300' || true";
    out.aFind = await call(a.client, "bash_code_execution", { command: find });
    out.bFind = await call(b.client, "bash_code_execution", { command: find });
    out.bList = await call(b.client, "list_files", {});
    await a.transport.terminateSession();
    await b.transport.terminateSession();
    await a.client.close();
    await b.client.close();
    return out;
  },

  // Without the bearer token the connection is refused.
  async noauth() {
    try {
      await connect("anonymous", false);
      return { connected: true };
    } catch (e) {
      return { connected: false, error: String(e), code: e.code ?? null };
    }
  },

  // Connect and keep the session: the test ends it (its id is printed).
  async open() {
    const { transport } = await connect();
    return { sessionId: transport.sessionId };
  },
};

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}; one of ${Object.keys(scenarios).join(", ")}`);
  process.exit(2);
}
try {
  const out = await run();
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
} catch (e) {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
}
