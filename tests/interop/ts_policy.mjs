#!/usr/bin/env node
// Interop client peer for the operator's policy and a config reload: the official TypeScript
// SDK `Client` over Streamable HTTP, through taskgate in front of its built-in demo (tools
// echo, add, slow, fail, ask), with `[upstream.tools] deny = ["add"]` and a rate limit of
// `burst = 2` calls.
//
//   node ts_policy.mjs [policy] --http <url>
//
// 1. `add` is absent from the listing, and calling it is refused as an unknown tool (-32602).
// 2. Two calls of `echo` pass; the third is past the bucket: the SDK throws the HTTP 429 the
//    gateway answers, with the JSON-RPC -32004 and its `retryAfterMs` in the body.
// 3. Prints `RELOAD <session id>` and waits for a line on stdin: the test meanwhile rewrites
//    the config (`deny = ["echo"]`, no limit) and sends the gateway SIGHUP.
// 4. On the same session, without initializing again: `echo` is gone, `add` is back and
//    answers, and calls are no longer limited.
//
// Prints one line per check, `ok <check>` or `FAIL <check>: <why>`, stops at the first
// failure (exit 1), and ends with `PASS policy: <n> checks` (exit 0). (The check runner,
// command line and message log are in harness.mjs.)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import readline from 'node:readline';
import {
  allPages,
  allText,
  assert,
  brief,
  check,
  makeTransport,
  makeUsage,
  onShutdown,
  parseCommandLine,
  run,
} from './harness.mjs';

const usage = makeUsage('ts_policy', 'usage: node ts_policy.mjs [policy] --http <url>');
let argv = process.argv.slice(2);
if (argv[0] === 'policy') argv = argv.slice(1);
const cmdline = parseCommandLine(argv, usage, (flag) => usage(`unknown option ${flag}`));
if (cmdline.mode !== '--http') usage('the reload is sent to an HTTP gateway');

const client = new Client({ name: 'taskgate-interop-ts-policy', version: '1.0.0' }, { capabilities: {} });
onShutdown(async () => {
  await client.transport?.terminateSession?.().catch(() => {});
  await client.close().catch(() => {});
});

const tools = async () => (await allPages('tools', (cursor) => client.listTools(cursor ? { cursor } : {}))).map((t) => t.name);
const call = (name, args) => client.callTool({ name, arguments: args }, CallToolResultSchema);
const refusal = async (name, args) => {
  try {
    const r = await call(name, args);
    return { result: r };
  } catch (e) {
    return { error: e };
  }
};
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

await run('policy', async () => {
  const transport = makeTransport('ts_policy', cmdline);
  await check('connects', () => client.connect(transport));
  const session = transport.sessionId;
  await check('a denied tool is not listed', async () => {
    const names = await tools();
    assert(names.includes('echo') && !names.includes('add'), `tools: ${brief(names)}`);
  });
  await check('a denied tool is refused as unknown', async () => {
    const { result, error } = await refusal('add', { a: 1, b: 2 });
    assert(error, `add answered: ${brief(result)}`);
    assert(error.code === -32602 && /unknown tool "add"/.test(error.message), `error: ${error.code} ${error.message}`);
  });
  await check('calls within the bucket pass', async () => {
    for (const text of ['one', 'two']) {
      const r = await call('echo', { text });
      assert(allText(r) === text, brief(r));
    }
  });
  await check('a call past the bucket gets 429 with retryAfterMs', async () => {
    const { result, error } = await refusal('echo', { text: 'three' });
    assert(error, `the third call answered: ${brief(result)}`);
    assert(error.code === 429, `error: ${error.code} ${error.message}`);
    assert(/-32004/.test(error.message) && /retryAfterMs/.test(error.message), `body: ${error.message}`);
  });
  console.log(`RELOAD ${session}`);
  await check('the reload is done', async () => {
    const { value, done } = await lines.next();
    assert(!done && value.trim() === 'go', `stdin: ${value}`);
  });
  await check('the same session sees the new policy at once', async () => {
    assert(transport.sessionId === session, `session ${transport.sessionId} is not ${session}`);
    const names = await tools();
    assert(names.includes('add') && !names.includes('echo'), `tools: ${brief(names)}`);
    const { error } = await refusal('echo', { text: 'x' });
    assert(error?.code === -32602, `echo: ${error?.code} ${error?.message}`);
  });
  await check('and is no longer limited', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await call('add', { a: i, b: 1 });
      assert(allText(r) === String(i + 1), brief(r));
    }
  });
});
