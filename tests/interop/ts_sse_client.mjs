#!/usr/bin/env node
// Interop client peer for the legacy HTTP+SSE transport (protocol 2024-11-05): the TypeScript
// SDK 1.0.4 (`sdk-2024-11-05` in package.json, the last release that speaks only 2024-11-05),
// its `Client` over its `SSEClientTransport`.
//
//   node ts_sse_client.mjs <scenario> <sse-url>
//
// Scenarios: demo       (taskgate's built-in demo server behind /sse/demo),
//            everything (@modelcontextprotocol/server-everything behind /sse/everything),
//            pyserver   (py_server.py, e.g. in --modern mode: tools and progress).
//
// The 1.0.4 transport uses the global EventSource, which Node.js 20 lacks: the `eventsource`
// package (installed for the current SDK) provides it.
//
// INTEROP_LOG_MESSAGES=1 prints every JSON-RPC message sent (->) and received (<-) to stderr.
// Output and exit codes as in ts_client.mjs (the check runner is harness.mjs).

import { EventSource } from 'eventsource';
import { Client } from 'sdk-2024-11-05/client/index.js';
import { SSEClientTransport } from 'sdk-2024-11-05/client/sse.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  LATEST_PROTOCOL_VERSION,
  ListRootsRequestSchema,
} from 'sdk-2024-11-05/types.js';
import {
  CALL_TIMEOUT_MS,
  LOG_MESSAGES,
  allText,
  assert,
  brief,
  check,
  checkPrompt,
  makeUsage,
  onShutdown,
  run,
} from './harness.mjs';

globalThis.EventSource = EventSource;

const usage = makeUsage('ts_sse_client', 'usage: node ts_sse_client.mjs <demo|everything|pyserver> <sse-url>');
const [scenario, url] = process.argv.slice(2);
if (!['demo', 'everything', 'pyserver'].includes(scenario) || !url || process.argv.length !== 4) usage();

const seen = { sampling: [], roots: 0 };
// The initialize exchange, as it went over the wire.
const wire = { offered: undefined, negotiated: undefined, initializeId: undefined, received: 0 };

const client = new Client(
  { name: 'taskgate-interop-sse-client', version: '1.0.0' },
  { capabilities: { sampling: {}, roots: { listChanged: true } } },
);

client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const first = req.params.messages.find((m) => m.role === 'user' && m.content?.type === 'text');
  const text = first?.content.text ?? '';
  seen.sampling.push(text);
  return { role: 'assistant', content: { type: 'text', text: `sampled: ${text}` }, model: 'taskgate-interop-model' };
});

client.setRequestHandler(ListRootsRequestSchema, async () => {
  seen.roots += 1;
  return { roots: [{ uri: 'file:///tmp', name: 'tmp' }] };
});

client.onerror = (e) => console.error(`ts_sse_client: transport error: ${e?.message || e}`);

// The SDK's transport, tapped: records the initialize exchange (and logs every message).
function makeTransport() {
  const t = new SSEClientTransport(new URL(url));
  const t0 = Date.now();
  const log = (dir, msg) => {
    if (LOG_MESSAGES) console.error(`ts_sse_client: +${String(Date.now() - t0).padStart(5)}ms ${dir} ${JSON.stringify(msg)}`);
  };
  const send = t.send.bind(t);
  t.send = (msg) => {
    if (msg?.method === 'initialize') {
      wire.initializeId = msg.id;
      wire.offered = msg.params?.protocolVersion;
    }
    log('->', msg);
    return send(msg);
  };
  let handler;
  Object.defineProperty(t, 'onmessage', {
    configurable: true,
    get: () =>
      handler &&
      ((msg) => {
        wire.received += 1;
        if (msg?.id === wire.initializeId && msg.result) wire.negotiated = msg.result.protocolVersion;
        log('<-', msg);
        handler(msg);
      }),
    set: (h) => {
      handler = h;
    },
  });
  return t;
}

const callTool = (name, args, opts = {}) =>
  client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: CALL_TIMEOUT_MS, ...opts });

// Closing the transport closes the stream, which ends the session at the gateway.
onShutdown(() => client.close());

async function checkConnect() {
  await check('initialize over HTTP+SSE', async () => {
    const transport = makeTransport();
    await client.connect(transport);
    assert(LATEST_PROTOCOL_VERSION === '2024-11-05', `the pinned SDK speaks ${LATEST_PROTOCOL_VERSION}`);
    assert(wire.offered === '2024-11-05', `offered ${wire.offered}`);
    assert(wire.negotiated === '2024-11-05', `negotiated ${wire.negotiated}`);
    const endpoint = transport._endpoint;
    const stream = new URL(url);
    assert(endpoint?.origin === stream.origin, `endpoint ${endpoint} is not on the stream's origin`);
    assert(endpoint.pathname === `${stream.pathname}/messages`, `endpoint path ${endpoint.pathname}`);
    assert(/^[0-9a-f]{32}$/.test(endpoint.searchParams.get('sessionId') ?? ''), `endpoint ${endpoint} has no session id`);
    assert(client.getServerVersion()?.name, 'no serverInfo');
  });
}

async function checkTools(required) {
  await check('tools/list', async () => {
    const res = await client.listTools(undefined, { timeout: CALL_TIMEOUT_MS });
    const names = res.tools.map((t) => t.name);
    const missing = required.filter((n) => !names.includes(n));
    assert(missing.length === 0, `missing tools ${missing.join(', ')} (got: ${names.join(', ')})`);
    // A 2024-11-05 tool has name, description and inputSchema: what newer servers add
    // (annotations, title, outputSchema, icons, execution) is translated away by the gateway.
    for (const t of res.tools) {
      for (const k of ['annotations', 'title', 'outputSchema', 'icons', 'execution']) {
        assert(!(k in t), `tool ${t.name} carries ${k}, which 2024-11-05 lacks: ${brief(t)}`);
      }
    }
  });
}

async function checkProgress(tool, args, minCount) {
  await check('progress', async () => {
    const events = [];
    const res = await callTool(tool, args, { onprogress: (p) => events.push(p) });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(events.length >= minCount, `expected >= ${minCount} progress notifications, got ${events.length}`);
    for (let i = 1; i < events.length; i++) {
      assert(events[i].progress > events[i - 1].progress, `progress not increasing: ${brief(events)}`);
    }
    assert(events.every((e) => !('message' in e)), `2024-11-05 progress has no message: ${brief(events)}`);
  });
}

async function checkResource(uriWanted) {
  let uri = uriWanted;
  await check('resources/list', async () => {
    const res = await client.listResources(undefined, { timeout: CALL_TIMEOUT_MS });
    const uris = res.resources.map((r) => r.uri);
    assert(uris.length > 0, 'no resources listed');
    if (uri) assert(uris.includes(uri), `${uri} not listed (got: ${brief(uris)})`);
    uri ??= uris[0];
  });
  await check('resources/read', async () => {
    const res = await client.readResource({ uri }, { timeout: CALL_TIMEOUT_MS });
    const c = res.contents[0];
    assert(c?.uri === uri, `content uri ${c?.uri} != ${uri}`);
    assert((c.text ?? c.blob ?? '').length > 0, `empty content for ${uri}`);
  });
}

async function scenarioDemo() {
  await checkConnect();
  await checkTools(['echo', 'add', 'slow', 'fail']);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { text: 'hello over sse' });
    assert(res.content?.[0]?.text === 'hello over sse', `echo gave ${brief(res)}`);
    // The demo's structured result (2025-06-18 on) reaches a 2024-11-05 client as a text block.
    assert(!('structuredContent' in res), `structuredContent reached a 2024-11-05 client: ${brief(res)}`);
    const structured = res.content.slice(1).map((b) => {
      try {
        return JSON.parse(b.text);
      } catch {
        return undefined;
      }
    });
    assert(structured.some((v) => v?.arguments?.text === 'hello over sse'), `no text block carries the structured result: ${brief(res)}`);
  });
  await check('tools/call fail', async () => {
    const res = await callTool('fail', {});
    assert(res.isError === true, `isError is ${res.isError}`);
  });
  await checkProgress('slow', { duration_ms: 300, steps: 3 }, 2);
  await checkResource('demo://readme');
  await checkPrompt(client, 'greet', { name: 'interop' }, 'interop');
  await check('ping', () => client.ping());
}

async function scenarioEverything() {
  await checkConnect();
  await checkTools(['echo', 'trigger-long-running-operation', 'trigger-sampling-request', 'get-roots-list']);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { message: 'hello over sse' });
    assert(allText(res) === 'Echo: hello over sse', `echo gave ${brief(allText(res))}`);
  });
  await checkResource(undefined);
  await checkPrompt(client, 'simple-prompt', undefined, 'simple prompt');
  await checkProgress('trigger-long-running-operation', { duration: 1, steps: 3 }, 2);
  await check('sampling (a server request answered by POST)', async () => {
    const before = seen.sampling.length;
    const res = await callTool('trigger-sampling-request', { prompt: 'interop-sampling', maxTokens: 20 });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.sampling.length === before + 1, `client got ${seen.sampling.length - before} sampling requests`);
    assert(allText(res).includes(`sampled: ${seen.sampling[before]}`), `result: ${brief(allText(res))}`);
  });
  await check('roots', async () => {
    const res = await callTool('get-roots-list', {});
    assert(seen.roots >= 1, 'server never sent roots/list');
    assert(allText(res).includes('file:///tmp'), `roots result: ${brief(allText(res))}`);
  });
  await check('ping', () => client.ping());
}

async function scenarioPyServer() {
  await checkConnect();
  await checkTools(['echo', 'add', 'slow', 'stats']);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { text: 'hello py_server' });
    assert(!res.isError && allText(res) === 'hello py_server', `echo gave ${brief(res)}`);
  });
  await check('tools/call add', async () => {
    const res = await callTool('add', { a: 2, b: 3 });
    assert(allText(res).trim() === '5', `2 + 3 gave ${brief(allText(res))}`);
  });
  await checkProgress('slow', { seconds: 0.6, steps: 3 }, 2);
  await check('ping', () => client.ping());
}

await run(scenario, { demo: scenarioDemo, everything: scenarioEverything, pyserver: scenarioPyServer }[scenario]);
