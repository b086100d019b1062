#!/usr/bin/env node
// One cell of the compatibility matrix (tests/compatibility.rs), driven by a TypeScript SDK
// `Client` of a chosen release:
//
//   node ts_cell.mjs <sdk-package-dir> <cell-json>
//
// <sdk-package-dir> is an installed @modelcontextprotocol/sdk (tests/interop/node_modules/…:
// 1.32.2, or the aliases sdk-2024-11-05 = 1.0.4, sdk-2025-03-26 = 1.12.3, sdk-2025-06-18 =
// 1.22.0); each release offers its own newest protocol version in `initialize`.
// <cell-json>: {"target": {"stdio": [cmd, ...args]} | {"http": url} | {"sse": url},
//               "list": tool name tools/list must show,
//               "call": {"name", "arguments", "expect"} (text the result must contain),
//               "task": null | {"kind": "hosted" | "relayed" | "bridged", "name", "arguments", "expect"}}
// A hosted or relayed task is a 2025-11-25 task-augmented `tools/call`, followed with
// `tasks/get` until it ends and `tasks/result`; a bridged one is a plain `tools/call` of a tool
// the server requires as a task.
//
// Prints one line, `CELL <json>`: {"version": negotiated version, "steps": [{"step", "ok",
// "detail"}]}; it stops at the first failed step. Exits 0 when every step passed.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const TIMEOUT_MS = Number(process.env.COMPAT_TIMEOUT_MS || 60000);
const [sdkDir, cellJson] = process.argv.slice(2);
if (!sdkDir || !cellJson) {
  console.error('usage: node ts_cell.mjs <sdk-package-dir> <cell-json>');
  process.exit(2);
}
const cell = JSON.parse(cellJson);
const out = { version: null, steps: [] };
let client;

function finish(code) {
  console.log(`CELL ${JSON.stringify(out)}`);
  const done = () => process.exit(code);
  Promise.race([client?.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000))]).then(done, done);
}
setTimeout(() => {
  out.steps.push({ step: 'timeout', ok: false, detail: `no end within ${TIMEOUT_MS} ms` });
  finish(1);
}, TIMEOUT_MS).unref();

async function load(rel) {
  for (const p of [path.join(sdkDir, 'dist/esm', rel), path.join(sdkDir, 'dist', rel)]) {
    if (fs.existsSync(p)) return import(p);
  }
  throw new Error(`${rel} not found under ${sdkDir}`);
}

async function step(name, fn) {
  try {
    const detail = await fn();
    out.steps.push({ step: name, ok: true, detail: detail ?? '' });
  } catch (e) {
    out.steps.push({ step: name, ok: false, detail: String(e?.message ?? e).slice(0, 300) });
    finish(1);
    await new Promise(() => {}); // finish exits
  }
}

const text = (result) =>
  (result?.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');

function expectText(result, want) {
  if (result?.isError) throw new Error(`isError: ${text(result).slice(0, 200)}`);
  if (!text(result).includes(want)) throw new Error(`result lacks ${JSON.stringify(want)}: ${text(result).slice(0, 200)}`);
}

const { Client } = await load('client/index.js');
const types = await load('types.js');

async function makeTransport() {
  const t = cell.target;
  if (t.stdio) {
    const { StdioClientTransport } = await load('client/stdio.js');
    return new StdioClientTransport({ command: t.stdio[0], args: t.stdio.slice(1), env: { ...process.env }, stderr: 'inherit' });
  }
  if (t.http) {
    const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
    return new StreamableHTTPClientTransport(new URL(t.http));
  }
  // The SSE transport of SDK 1.0.x needs a global EventSource, which Node.js 20 lacks.
  const here = path.dirname(fileURLToPath(import.meta.url));
  const { EventSource } = await import(path.join(here, '../interop/node_modules/eventsource/dist/index.js'));
  globalThis.EventSource ??= EventSource;
  const { SSEClientTransport } = await load('client/sse.js');
  return new SSEClientTransport(new URL(t.sse));
}

const transport = await makeTransport();
// The negotiated version, as it came over the wire.
const send = transport.send.bind(transport);
let initId;
transport.send = (msg, options) => {
  if (msg.method === 'initialize') initId = msg.id;
  return send(msg, options);
};
let handler;
Object.defineProperty(transport, 'onmessage', {
  configurable: true,
  get: () =>
    handler &&
    ((msg, extra) => {
      if (initId !== undefined && msg.id === initId && msg.result) out.version = msg.result.protocolVersion;
      handler(msg, extra);
    }),
  set: (h) => {
    handler = h;
  },
});

client = new Client({ name: 'taskgate-compat', version: '1.0.0' }, { capabilities: {} });
const opts = { timeout: 30000 };

await step('connect', async () => {
  await client.connect(transport);
  return out.version;
});
await step('tools/list', async () => {
  const names = [];
  let cursor;
  for (let i = 0; i < 20; i++) {
    const page = await client.listTools(cursor ? { cursor } : {}, opts);
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  if (!names.includes(cell.list)) throw new Error(`${cell.list} not listed (got ${names.join(', ').slice(0, 200)})`);
  return `${names.length} tools`;
});
await step('tools/call', async () => {
  const r = await client.callTool({ name: cell.call.name, arguments: cell.call.arguments }, undefined, opts);
  expectText(r, cell.call.expect);
});
const task = cell.task;
if (task?.kind === 'bridged') {
  await step('task', async () => {
    const r = await client.callTool({ name: task.name, arguments: task.arguments }, undefined, { timeout: 50000 });
    expectText(r, task.expect);
    return 'bridged';
  });
} else if (task) {
  await step('task', async () => {
    const created = await client.request(
      { method: 'tools/call', params: { name: task.name, arguments: task.arguments, task: { ttl: 60000 } } },
      types.CreateTaskResultSchema,
      opts,
    );
    const id = created.task?.taskId;
    if (!id) throw new Error(`no task created: ${JSON.stringify(created).slice(0, 200)}`);
    let status = created.task.status;
    for (let i = 0; i < 200 && !['completed', 'failed', 'cancelled'].includes(status); i++) {
      await new Promise((r) => setTimeout(r, Math.min(Math.max(created.task.pollInterval ?? 250, 100), 1000)));
      status = (await client.request({ method: 'tasks/get', params: { taskId: id } }, types.GetTaskResultSchema, opts)).status;
    }
    if (status !== 'completed') throw new Error(`task ended ${status}`);
    const r = await client.request({ method: 'tasks/result', params: { taskId: id } }, types.CallToolResultSchema, opts);
    expectText(r, task.expect);
    return task.kind;
  });
}
finish(0);
