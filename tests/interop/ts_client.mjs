#!/usr/bin/env node
// Interop client peer: the official TypeScript SDK `Client` (pinned in package.json).
//
//   node ts_client.mjs <scenario> --http <url>
//   node ts_client.mjs <scenario> --stdio <command> [args...]
//
// Scenarios: everything (against @modelcontextprotocol/server-everything),
//            tsserver   (against ts_server.mjs),
//            demo       (against taskgate's built-in demo server).
//
// Prints one line per check, `ok <check>` or `FAIL <check>: <why>`, stops at the first
// failure (exit 1), and ends with `PASS <scenario>: <n> checks` (exit 0). A global timeout
// (INTEROP_TIMEOUT_MS, default 60000) fails the check that is running and exits 1.
// Usage errors exit 2.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const USAGE =
  'usage: node ts_client.mjs <everything|tsserver|demo> (--http <url> | --stdio <command> [args...])';
const TIMEOUT_MS = Number(process.env.INTEROP_TIMEOUT_MS || 60000);
const CALL_TIMEOUT_MS = 30000; // per request; the global timeout bounds the whole run

// ---------------------------------------------------------------------------
// check runner

let current = 'startup';
let passed = 0;
let client;
let finished = false;

function fail(name, why) {
  if (finished) return;
  finished = true;
  console.log(`FAIL ${name}: ${String(why).replace(/\s+/g, ' ').trim()}`);
  shutdown(1);
}

function shutdown(code) {
  const done = () => process.exit(code);
  // Closing kills a stdio child / ends an HTTP session; never wait for it long.
  setTimeout(done, 3000).unref();
  Promise.resolve()
    .then(() => client?.close())
    .catch(() => {})
    .finally(done);
}

const globalTimer = setTimeout(
  () => fail(current, `global timeout after ${TIMEOUT_MS} ms`),
  TIMEOUT_MS,
);
process.on('unhandledRejection', (e) => fail(current, `unhandled rejection: ${e?.stack || e}`));
process.on('uncaughtException', (e) => fail(current, `uncaught exception: ${e?.stack || e}`));

async function check(name, fn) {
  current = name;
  try {
    await fn();
  } catch (e) {
    fail(name, e?.message || e);
    // Park this chain: shutdown() exits the process.
    await new Promise(() => {});
  }
  if (finished) await new Promise(() => {});
  passed += 1;
  console.log(`ok ${name}`);
}

function assert(cond, why) {
  if (!cond) throw new Error(why);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(pred, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return;
    await sleep(25);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

function texts(result) {
  return (result?.content || []).filter((c) => c.type === 'text').map((c) => c.text);
}

function allText(result) {
  return texts(result).join('\n');
}

const brief = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s.length > 300 ? `${s.slice(0, 300)}...` : s;
};

// ---------------------------------------------------------------------------
// arguments

const argv = process.argv.slice(2);
const scenario = argv[0];
const mode = argv[1];
if (!['everything', 'tsserver', 'demo'].includes(scenario) || !['--http', '--stdio'].includes(mode) || argv.length < 3) {
  console.error(USAGE);
  process.exit(2);
}
if (mode === '--http' && argv.length !== 3) {
  console.error(USAGE);
  process.exit(2);
}

// ---------------------------------------------------------------------------
// client with the capabilities every scenario relies on

const seen = { sampling: [], elicitation: [], roots: 0, logs: [] };

function firstUserText(messages) {
  for (const m of messages || []) {
    if (m.role !== 'user') continue;
    const blocks = Array.isArray(m.content) ? m.content : [m.content];
    for (const b of blocks) if (b?.type === 'text') return b.text;
  }
  return '';
}

// A value of the right type for one JSON-schema property of a form elicitation.
function valueFor(prop) {
  if (prop?.const !== undefined) return prop.const;
  if (Array.isArray(prop?.enum) && prop.enum.length) return prop.enum[0];
  if (Array.isArray(prop?.oneOf) && prop.oneOf.length && prop.oneOf[0].const !== undefined) return prop.oneOf[0].const;
  if (Array.isArray(prop?.anyOf) && prop.anyOf.length && prop.anyOf[0].const !== undefined) return prop.anyOf[0].const;
  switch (prop?.type) {
    case 'boolean':
      return true;
    case 'integer':
      return Number.isInteger(prop.minimum) ? prop.minimum : Number.isInteger(prop.maximum) && prop.maximum < 1 ? prop.maximum : 1;
    case 'number':
      return typeof prop.minimum === 'number' ? prop.minimum : typeof prop.maximum === 'number' && prop.maximum < 1 ? prop.maximum : 1;
    case 'array': {
      const n = Math.max(1, prop.minItems || 0);
      return Array.from({ length: n }, () => valueFor(prop.items || { type: 'string' }));
    }
    case 'string':
    default:
      if (prop?.format === 'email') return 'interop@example.com';
      if (prop?.format === 'uri') return 'https://example.com/interop';
      if (prop?.format === 'date') return '2020-01-01';
      if (prop?.format === 'date-time') return '2020-01-01T00:00:00Z';
      return 'interop';
  }
}

// Fill every required property; a schema that requires nothing gets every property filled.
function fillSchema(schema) {
  const content = {};
  const props = schema?.properties || {};
  const required = Array.isArray(schema?.required) && schema.required.length ? schema.required : Object.keys(props);
  for (const key of required) content[key] = valueFor(props[key]);
  return content;
}

client = new Client(
  { name: 'taskgate-interop-ts-client', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);

client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const text = firstUserText(req.params.messages);
  seen.sampling.push(text);
  return {
    role: 'assistant',
    content: { type: 'text', text: `sampled: ${text}` },
    model: 'taskgate-interop-model',
    stopReason: 'endTurn',
  };
});

client.setRequestHandler(ElicitRequestSchema, async (req) => {
  const content = fillSchema(req.params.requestedSchema);
  seen.elicitation.push({ params: req.params, content });
  return { action: 'accept', content };
});

client.setRequestHandler(ListRootsRequestSchema, async () => {
  seen.roots += 1;
  return { roots: [{ uri: 'file:///tmp', name: 'tmp' }] };
});

client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  seen.logs.push(n.params);
});

client.onerror = (e) => {
  // Transport-level errors are reported on stderr; a check fails if they matter.
  console.error(`ts_client: transport error: ${e?.message || e}`);
};

function makeTransport() {
  if (mode === '--http') {
    return new StreamableHTTPClientTransport(new URL(argv[2]));
  }
  return new StdioClientTransport({
    command: argv[2],
    args: argv.slice(3),
    env: { ...process.env },
    stderr: 'inherit',
  });
}

const callTool = (name, args, opts = {}) =>
  client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: CALL_TIMEOUT_MS, ...opts });

// ---------------------------------------------------------------------------
// shared checks

async function checkConnect() {
  await check('initialize', async () => {
    await client.connect(makeTransport(), { timeout: CALL_TIMEOUT_MS });
    const info = client.getServerVersion();
    assert(info && info.name, `no serverInfo in initialize result`);
    assert(client.getServerCapabilities(), 'no server capabilities');
  });
}

async function checkToolsListed(required) {
  let names = [];
  await check('tools/list', async () => {
    const res = await client.listTools(undefined, { timeout: CALL_TIMEOUT_MS });
    names = res.tools.map((t) => t.name);
    const missing = required.filter((n) => !names.includes(n));
    assert(missing.length === 0, `missing tools ${missing.join(', ')} (got: ${names.join(', ')})`);
  });
  return names;
}

async function checkProgress(checkName, tool, args, minCount) {
  await check(checkName, async () => {
    const events = [];
    const res = await callTool(tool, args, { onprogress: (p) => events.push(p) });
    assert(!res.isError, `tool returned isError: ${brief(allText(res))}`);
    assert(events.length >= minCount, `expected >= ${minCount} progress notifications, got ${events.length}`);
    for (let i = 1; i < events.length; i++) {
      assert(
        events[i].progress > events[i - 1].progress,
        `progress not increasing: ${events.map((e) => e.progress).join(', ')}`,
      );
    }
  });
}

async function checkPing() {
  await check('ping', async () => {
    await client.ping({ timeout: CALL_TIMEOUT_MS });
  });
}

async function checkResource(uriWanted) {
  await check('resources/list', async () => {
    const res = await client.listResources(undefined, { timeout: CALL_TIMEOUT_MS });
    assert(res.resources.length > 0, 'no resources listed');
    if (uriWanted) {
      const uris = res.resources.map((r) => r.uri);
      assert(uris.includes(uriWanted), `${uriWanted} not listed (got: ${brief(uris)})`);
    } else {
      uriWanted = res.resources[0].uri;
    }
  });
  await check('resources/read', async () => {
    const res = await client.readResource({ uri: uriWanted }, { timeout: CALL_TIMEOUT_MS });
    assert(res.contents.length > 0, `no contents for ${uriWanted}`);
    const c = res.contents[0];
    assert(c.uri === uriWanted, `content uri ${c.uri} != ${uriWanted}`);
    assert(
      (typeof c.text === 'string' && c.text.length > 0) || (typeof c.blob === 'string' && c.blob.length > 0),
      `empty content for ${uriWanted}`,
    );
  });
}

async function checkPrompt(name, args, wantText) {
  await check('prompts/list', async () => {
    const res = await client.listPrompts(undefined, { timeout: CALL_TIMEOUT_MS });
    const names = res.prompts.map((p) => p.name);
    assert(names.includes(name), `prompt ${name} not listed (got: ${names.join(', ')})`);
  });
  await check('prompts/get', async () => {
    const res = await client.getPrompt({ name, arguments: args }, { timeout: CALL_TIMEOUT_MS });
    assert(res.messages.length > 0, `prompt ${name} returned no messages`);
    const text = res.messages
      .flatMap((m) => (Array.isArray(m.content) ? m.content : [m.content]))
      .filter((c) => c?.type === 'text')
      .map((c) => c.text)
      .join('\n');
    assert(text.length > 0, `prompt ${name} has no text message`);
    if (wantText) assert(text.includes(wantText), `prompt text lacks "${wantText}": ${brief(text)}`);
  });
}

// ---------------------------------------------------------------------------
// scenarios

async function scenarioEverything() {
  // Tool names and arguments as listed by server-everything 2026.8.31 itself. The
  // sampling/elicitation/roots tools are registered only for clients that declare
  // those capabilities.
  await checkConnect();
  await checkToolsListed([
    'echo',
    'trigger-long-running-operation',
    'trigger-sampling-request',
    'trigger-elicitation-request',
    'toggle-simulated-logging',
    'get-roots-list',
  ]);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { message: 'hello interop' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(allText(res) === 'Echo: hello interop', `unexpected echo text: ${brief(allText(res))}`);
  });
  await checkResource(undefined);
  await checkPrompt('simple-prompt', undefined, 'simple prompt');
  await checkProgress('progress', 'trigger-long-running-operation', { duration: 1, steps: 3 }, 2);
  await check('sampling', async () => {
    const before = seen.sampling.length;
    const res = await callTool('trigger-sampling-request', { prompt: 'interop-sampling', maxTokens: 20 });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.sampling.length === before + 1, `client got ${seen.sampling.length - before} sampling requests, want 1`);
    const want = `sampled: ${seen.sampling[before]}`;
    assert(seen.sampling[before].includes('interop-sampling'), `sampling prompt lacks the tool argument: ${brief(seen.sampling[before])}`);
    assert(allText(res).includes(want), `result lacks "${want}": ${brief(allText(res))}`);
  });
  await check('elicitation', async () => {
    const before = seen.elicitation.length;
    const res = await callTool('trigger-elicitation-request', {});
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.elicitation.length === before + 1, `client got ${seen.elicitation.length - before} elicitation requests, want 1`);
    const text = allText(res);
    assert(text.includes('User provided the requested information'), `result does not show acceptance: ${brief(text)}`);
    assert(text.includes('Name: interop'), `result lacks the accepted name: ${brief(text)}`);
  });
  await check('roots', async () => {
    const res = await callTool('get-roots-list', {});
    const text = allText(res);
    assert(seen.roots >= 1, 'server never sent roots/list');
    assert(text.includes('file:///tmp'), `roots result lacks file:///tmp: ${brief(text)}`);
  });
  await check('logging', async () => {
    await client.setLoggingLevel('debug', { timeout: CALL_TIMEOUT_MS });
    // toggle-simulated-logging starts a per-session timer that sends one random-level
    // notifications/message at once and then one every 5 s; calling it again stops it.
    const before = seen.logs.length;
    const res = await callTool('toggle-simulated-logging', {});
    assert(allText(res).includes('Started simulated'), `toggle did not start logging: ${brief(allText(res))}`);
    try {
      await waitFor(() => seen.logs.length > before, 15000, 'a notifications/message');
    } finally {
      const off = await callTool('toggle-simulated-logging', {});
      assert(allText(off).includes('Stopped simulated'), `toggle did not stop logging: ${brief(allText(off))}`);
    }
    const msg = seen.logs[before];
    assert(typeof msg.level === 'string' && msg.data !== undefined, `malformed log message ${brief(msg)}`);
  });
  await checkPing();
}

async function scenarioTsServer() {
  await checkConnect();
  await checkToolsListed(['echo', 'progress', 'sample', 'elicit', 'log']);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { text: 'hello interop' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(allText(res) === 'hello interop', `unexpected echo text: ${brief(allText(res))}`);
  });
  await checkResource('interop://greeting');
  await checkPrompt('greet', { name: 'interop' }, 'interop');
  await checkProgress('progress', 'progress', { steps: 4, interval_ms: 50 }, 4);
  await check('sampling', async () => {
    const before = seen.sampling.length;
    const res = await callTool('sample', { prompt: 'interop-sampling' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.sampling.length === before + 1, `client got ${seen.sampling.length - before} sampling requests, want 1`);
    assert(allText(res) === 'sampled: interop-sampling', `unexpected result: ${brief(allText(res))}`);
  });
  await check('elicitation', async () => {
    const before = seen.elicitation.length;
    const res = await callTool('elicit', { message: 'interop asks' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.elicitation.length === before + 1, `client got ${seen.elicitation.length - before} elicitation requests, want 1`);
    const got = JSON.parse(allText(res));
    assert(got.action === 'accept', `action ${got.action}`);
    assert(
      JSON.stringify(got.content) === JSON.stringify(seen.elicitation[before].content),
      `content ${brief(got.content)} != sent ${brief(seen.elicitation[before].content)}`,
    );
  });
  await check('logging', async () => {
    await client.setLoggingLevel('debug', { timeout: CALL_TIMEOUT_MS });
    const res = await callTool('log', { message: 'interop-log' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    await waitFor(() => seen.logs.some((l) => l.data === 'interop-log'), 5000, 'notifications/message "interop-log"');
  });
  await checkPing();
}

async function scenarioDemo() {
  await checkConnect();
  await checkToolsListed(['echo', 'add', 'slow', 'fail', 'ask']);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { text: 'hello demo' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(allText(res) === 'hello demo', `unexpected echo text: ${brief(allText(res))}`);
  });
  await check('tools/call add', async () => {
    const res = await callTool('add', { a: 2, b: 3 });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(Number(allText(res).trim()) === 5, `2 + 3 gave ${brief(allText(res))}`);
  });
  await checkProgress('progress', 'slow', { duration_ms: 300, steps: 3 }, 2);
  await check('tools/call fail', async () => {
    const res = await callTool('fail', {});
    assert(res.isError === true, `isError is ${res.isError}: ${brief(res)}`);
  });
  await check('elicitation', async () => {
    const before = seen.elicitation.length;
    const res = await callTool('ask', {});
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.elicitation.length === before + 1, `client got ${seen.elicitation.length - before} elicitation requests, want 1`);
    const schema = seen.elicitation[before].params.requestedSchema;
    assert(schema?.properties?.answer?.type === 'string', `requestedSchema lacks string "answer": ${brief(schema)}`);
    const answer = seen.elicitation[before].content.answer;
    assert(answer === 'interop', `client did not fill "answer" (content ${brief(seen.elicitation[before].content)})`);
    assert(allText(res) === 'answer: interop', `unexpected result: ${brief(allText(res))}`);
  });
  await checkResource('demo://readme');
  await checkPrompt('greet', { name: 'interop' }, 'interop');
  await checkPing();
}

// ---------------------------------------------------------------------------

const scenarios = { everything: scenarioEverything, tsserver: scenarioTsServer, demo: scenarioDemo };

try {
  await scenarios[scenario]();
  finished = true;
  clearTimeout(globalTimer);
  console.log(`PASS ${scenario}: ${passed} checks`);
  shutdown(0);
} catch (e) {
  fail(current, e?.stack || e);
}
