#!/usr/bin/env node
// Interop client peer for bridged tasks: a gateway in front of server-everything, whose tool
// `simulate-research-query {topic, ambiguous}` has execution.taskSupport "required".
//
//   node ts_bridge.mjs [bridge] [options] --http <url>
//   node ts_bridge.mjs [bridge] [options] --stdio <command> [args...]
//
// (The scenario word `bridge` is optional: it lets a harness call both scripts alike.)
//
// Options:
//   --protocol <version>   the protocol version the client negotiates (default: 2025-06-18).
//                          2025-11-25: the SDK `Client` as it is (tasks visible, the tool
//                          "optional", plain and task-augmented calls).
//                          Older (2025-06-18, 2025-03-26, 2024-11-05): a raw JSON-RPC client
//                          on the SDK's own transports that sends `initialize` with that
//                          version (the SDK `Client` always offers its latest one) and must
//                          never see anything of tasks.
//   --topic <text>         the research topic (default: otters; "python" changes the
//                          interpretations server-everything offers)
//   --min-progress <n>     progress notifications a plain call must deliver (default: 2)
//   --no-cancel            skip the check that cancels a plain call with notifications/cancelled
//
// INTEROP_LOG_MESSAGES=1 prints every JSON-RPC message sent (->) and received (<-) to stderr.
//
// Prints one line per check, `ok <check>` or `FAIL <check>: <why>`, stops at the first
// failure (exit 1), and ends with `PASS bridge: <n> checks` (exit 0). A global timeout
// (INTEROP_TIMEOUT_MS, default 60000) fails the check that is running and exits 1.
// Usage errors exit 2. (The check runner, command line and message log are in harness.mjs.)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  LATEST_PROTOCOL_VERSION,
  RELATED_TASK_META_KEY,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';
import {
  CALL_TIMEOUT_MS,
  allPages,
  allText,
  assert,
  brief,
  check,
  makeTransport as openTransport,
  makeUsage,
  onShutdown,
  parseCommandLine,
  run,
  sleep,
  waitFor,
} from './harness.mjs';

const USAGE =
  'usage: node ts_bridge.mjs [bridge] [--protocol <version>] [--topic <text>] [--min-progress <n>] [--no-cancel]\n' +
  '                          (--http <url> | --stdio <command> [args...])';
const SCENARIO = 'bridge';
// The versions the SDK speaks (its SUPPORTED_PROTOCOL_VERSIONS, less the pre-release 2024-10-07).
const VERSIONS = SUPPORTED_PROTOCOL_VERSIONS.filter((v) => v !== '2024-10-07');
const TOOL = 'simulate-research-query';
// server-everything 2026.8.31's stages; each sets the task's statusMessage to `<stage>...`.
const STAGES = ['Gathering sources', 'Analyzing content', 'Synthesizing findings', 'Generating report'];

const note = (line) => console.error(`ts_bridge: ${line}`);

// ---------------------------------------------------------------------------
// arguments

const usage = makeUsage('ts_bridge', USAGE);

const opts = { protocol: '2025-06-18', topic: 'otters', minProgress: 2, cancel: true };
let argv = process.argv.slice(2);
if (argv[0] === SCENARIO) argv = argv.slice(1);
const cmdline = parseCommandLine(argv, usage, (flag, value) => {
  switch (flag) {
    case '--protocol':
      opts.protocol = value();
      if (!VERSIONS.includes(opts.protocol)) usage(`--protocol must be one of ${VERSIONS.join(', ')}`);
      break;
    case '--topic':
      opts.topic = value();
      if (!opts.topic) usage('--topic must not be empty');
      break;
    case '--min-progress': {
      const v = value();
      if (!/^\d+$/.test(v)) usage(`${flag} must be an integer >= 0`);
      opts.minProgress = Number(v);
      break;
    }
    case '--no-cancel':
      opts.cancel = false;
      break;
    default:
      usage(`unknown option ${flag}`);
  }
});
const TASKS_VERSION = opts.protocol === LATEST_PROTOCOL_VERSION; // 2025-11-25: the first with tasks
const PROGRESS_MESSAGES = opts.protocol >= '2025-03-26'; // notifications/progress `message`
const ELICITATION = opts.protocol >= '2025-06-18'; // elicitation/create

// ---------------------------------------------------------------------------
// the wire: every message, in both directions

const wire = { sent: [], received: [] };

// Records every message and, with INTEROP_LOG_MESSAGES=1, prints it.
const makeTransport = () =>
  openTransport('ts_bridge', cmdline, {
    onSend: (msg) => wire.sent.push({ at: Date.now(), msg }),
    onReceive: (msg) => wire.received.push({ at: Date.now(), msg }),
  });

// Paths (a.b[2].c) of every `io.modelcontextprotocol/related-task` key inside a value.
function relatedTaskPaths(v, path = '') {
  if (v === null || typeof v !== 'object') return [];
  const found = [];
  for (const [k, x] of Object.entries(v)) {
    const p = Array.isArray(v) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
    if (k === RELATED_TASK_META_KEY) found.push(p);
    found.push(...relatedTaskPaths(x, p));
  }
  return found;
}

// Anything of tasks among the received messages (from index `from` on).
function taskTraffic(from = 0) {
  const bad = [];
  for (const { msg } of wire.received.slice(from)) {
    if (typeof msg.method === 'string' && (msg.method === 'notifications/tasks/status' || msg.method.startsWith('tasks/'))) {
      bad.push(`method ${msg.method}`);
    }
    for (const p of relatedTaskPaths(msg)) bad.push(`${p} in ${msg.method ?? `response ${msg.id}`}`);
  }
  return bad;
}

// The value a client picks for the clarification: the `const` of the first `oneOf` option.
// Titled single-select (`oneOf`) is 2025-11-25's; a client of an older version gets the form
// its schema has, `enum` with `enumNames`, translated by the gateway.
function interpretationChoice(params) {
  const prop = params?.requestedSchema?.properties?.interpretation;
  if (!TASKS_VERSION) {
    assert(prop?.oneOf === undefined, `a ${opts.protocol} client got oneOf, which its version lacks: ${brief(prop)}`);
    assert(Array.isArray(prop?.enum) && prop.enum.length > 0, `requestedSchema has no enum for "interpretation": ${brief(params?.requestedSchema)}`);
    assert(Array.isArray(prop.enumNames) && prop.enumNames.length === prop.enum.length, `enumNames do not match enum: ${brief(prop)}`);
    return prop.enum[0];
  }
  assert(Array.isArray(prop?.oneOf) && prop.oneOf.length > 0, `requestedSchema has no oneOf for "interpretation": ${brief(params?.requestedSchema)}`);
  assert(typeof prop.oneOf[0].const === 'string', `first oneOf option has no string const: ${brief(prop.oneOf[0])}`);
  return prop.oneOf[0].const;
}

function assertReport(res, what, choice) {
  assert(res && Array.isArray(res.content), `${what}: not a CallToolResult: ${brief(res)}`);
  assert(res.task === undefined, `${what}: a CreateTaskResult for a plain call: ${brief(res)}`);
  assert(!res.isError, `${what}: isError: ${brief(allText(res))}`);
  const text = allText(res);
  const title = choice ? `Research Report: ${opts.topic} (${choice})` : `Research Report: ${opts.topic}`;
  assert(text.includes(title), `${what}: text lacks "${title}": ${brief(text)}`);
}

// The status messages server-everything's task goes through, in order (its statusMessage at
// each updateTaskStatus): every one must reach a bridged call's progress token, once, in order.
function statusTimeline(choice) {
  const stage = (i) => `${STAGES[i]}...`;
  if (choice === undefined) return [0, 1, 2, 3].map(stage);
  return [
    stage(0),
    stage(1),
    stage(2),
    `Found multiple interpretations for "${opts.topic}". Requesting clarification...`,
    `Continuing with interpretation: "${choice}"...`,
    stage(3),
  ];
}

// Progress notifications for a bridged call: strictly increasing values, each with a message
// (from 2025-03-26 on, where progress has `message`), the messages exactly the task's status
// messages in the order the task went through them.
function assertProgress(events, what, timeline) {
  const summary = events.map((p) => `${p.progress}${p.total !== undefined ? `/${p.total}` : ''} ${JSON.stringify(p.message)}`);
  note(`${what}: progress ${summary.join(', ') || '(none)'}`);
  assert(events.length >= opts.minProgress, `${what}: ${events.length} progress notifications, want >= ${opts.minProgress}`);
  for (let i = 0; i < events.length; i++) {
    assert(typeof events[i].progress === 'number', `${what}: progress ${brief(events[i])} has no numeric progress`);
    if (i > 0) assert(events[i].progress > events[i - 1].progress, `${what}: progress not increasing: ${summary.join(', ')}`);
  }
  if (!PROGRESS_MESSAGES && events.every((p) => p.message === undefined)) return;
  const got = events.map((p) => p.message);
  assert(got.every((m) => typeof m === 'string' && m.length > 0), `${what}: progress without a message: ${summary.join(', ')}`);
  const want = timeline.join(' | ');
  let last = -1;
  for (const m of got) {
    const at = timeline.indexOf(m);
    assert(at >= 0, `${what}: ${JSON.stringify(m)} is not a status of the task (${want}); got ${got.join(' | ')}`);
    assert(at > last, `${what}: status messages out of order or repeated: got ${got.join(' | ')}, the task went ${want}`);
    last = at;
  }
  const missing = timeline.filter((m) => !got.includes(m));
  assert(missing.length === 0, `${what}: status messages never reported as progress: ${missing.join(' | ')} (got ${got.join(' | ')})`);
}

// ---------------------------------------------------------------------------
// a client of a version before tasks: raw JSON-RPC on an SDK transport

class RawClient {
  constructor(transport) {
    this.transport = transport;
    this.nextId = 1;
    this.pending = new Map(); // id -> {resolve, reject, timer}
    this.answered = new Map(); // id -> response that arrived with nobody waiting (cancelled calls)
    this.notifications = [];
    this.handlers = new Map([['ping', async () => ({})]]);
    transport.onmessage = (msg) => this.dispatch(msg);
    transport.onerror = (e) => note(`transport error: ${e?.message || e}`);
    transport.onclose = () => {
      for (const [, p] of this.pending) p.reject(new Error('connection closed'));
      this.pending.clear();
    };
  }

  dispatch(msg) {
    if (typeof msg.method === 'string' && msg.id !== undefined) {
      const handler = this.handlers.get(msg.method);
      Promise.resolve()
        .then(() => {
          if (!handler) throw Object.assign(new Error(`method not found: ${msg.method}`), { code: -32601 });
          return handler(msg);
        })
        .then(
          (result) => this.transport.send({ jsonrpc: '2.0', id: msg.id, result }),
          (e) => this.transport.send({ jsonrpc: '2.0', id: msg.id, error: { code: e.code ?? -32603, message: String(e.message) } }),
        )
        .catch((e) => note(`could not answer ${msg.method}: ${e?.message || e}`));
    } else if (typeof msg.method === 'string') {
      this.notifications.push(msg);
    } else if (this.pending.has(msg.id)) {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      clearTimeout(p.timer);
      p.resolve(msg);
    } else {
      this.answered.set(msg.id, msg);
    }
  }

  async start() {
    await this.transport.start();
  }

  // Sends a request; resolves to the whole response message (result or error).
  send(method, params) {
    const id = this.nextId++;
    const done = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} (id ${id}): no response within ${CALL_TIMEOUT_MS} ms`));
      }, CALL_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
    });
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    this.transport.send(msg).catch((e) => {
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      clearTimeout(p.timer);
      p.reject(e);
    });
    return { id, done };
  }

  // Sends a request; resolves to its result, throws its error.
  async request(method, params) {
    const resp = await this.send(method, params).done;
    if (resp.error) throw Object.assign(new Error(`${method}: error ${resp.error.code}: ${resp.error.message}`), { code: resp.error.code });
    return resp.result;
  }

  // Forgets a request (after cancelling it): a late response then lands in `answered`.
  abandon(id) {
    const p = this.pending.get(id);
    if (!p) return;
    clearTimeout(p.timer);
    this.pending.delete(id);
  }

  notify(method, params) {
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    return this.transport.send(msg);
  }

  progressFor(token) {
    return this.notifications.filter((n) => n.method === 'notifications/progress' && n.params?.progressToken === token).map((n) => n.params);
  }

  async close() {
    await this.transport.terminateSession?.().catch(() => {});
    await this.transport.close().catch(() => {});
  }
}

async function scenarioOldVersion() {
  const version = opts.protocol;
  const transport = makeTransport();
  const rpc = new RawClient(transport);
  onShutdown(() => rpc.close());
  const elicitations = [];
  rpc.handlers.set('elicitation/create', async (msg) => {
    const seen = { msg };
    elicitations.push(seen);
    try {
      seen.choice = interpretationChoice(msg.params);
    } catch (e) {
      seen.error = e.message;
      throw Object.assign(e, { code: -32602 });
    }
    return { action: 'accept', content: { interpretation: seen.choice } };
  });

  let init;
  await check(`initialize: protocol ${version}`, async () => {
    await rpc.start();
    init = await rpc.request('initialize', {
      protocolVersion: version,
      capabilities: ELICITATION ? { elicitation: {} } : {},
      clientInfo: { name: 'taskgate-interop-ts-bridge', version: '1.0.0' },
    });
    assert(init.protocolVersion === version, `negotiated protocol version ${init.protocolVersion}, want ${version}`);
    assert(init.serverInfo?.name, `no serverInfo: ${brief(init)}`);
    // Over HTTP every later request carries MCP-Protocol-Version (the transport adds it) and
    // the session id the transport took from the initialize response.
    transport.setProtocolVersion?.(version);
    if (cmdline.mode === '--http') assert(transport.sessionId, 'no Mcp-Session-Id in the initialize response');
    await rpc.notify('notifications/initialized');
  });

  await check('initialize: no capabilities.tasks', async () => {
    assert(init.capabilities && typeof init.capabilities === 'object', `no capabilities: ${brief(init)}`);
    assert(!('tasks' in init.capabilities), `capabilities.tasks is ${brief(init.capabilities.tasks)}`);
    assert(init.capabilities.tools, `no capabilities.tools: ${brief(init.capabilities)}`);
  });

  await check('tools/list: no execution', async () => {
    const tools = await allPages('tools', (cursor) => rpc.request('tools/list', cursor ? { cursor } : {}));
    assert(tools.some((t) => t.name === TOOL), `${TOOL} not listed (got: ${tools.map((t) => t.name).join(', ')})`);
    const withExecution = tools.filter((t) => 'execution' in t).map((t) => `${t.name} ${JSON.stringify(t.execution)}`);
    assert(withExecution.length === 0, `tools with execution: ${withExecution.join('; ')}`);
  });

  await check('bridged call: result and progress', async () => {
    const token = 'bridge-plain';
    const res = await rpc.request('tools/call', { name: TOOL, arguments: { topic: opts.topic }, _meta: { progressToken: token } });
    assertReport(res, 'result');
    assert(relatedTaskPaths(res).length === 0, `result carries ${relatedTaskPaths(res).join(', ')}`);
    const before = rpc.progressFor(token).length;
    assertProgress(rpc.progressFor(token), 'plain call', statusTimeline());
    await sleep(500); // progress MUST stop with the response
    const after = rpc.progressFor(token);
    assert(after.length === before, `progress after the response: ${brief(after.slice(before))}`);
  });

  if (!ELICITATION) {
    // Before 2025-06-18 there is no elicitation: the client declares none, so none may reach it.
    // (server-everything then skips the question, or, if asked anyway, takes a default.)
    await check('bridged call: ambiguous, no elicitation', async () => {
      const token = 'bridge-ambiguous';
      const res = await rpc.request('tools/call', {
        name: TOOL,
        arguments: { topic: opts.topic, ambiguous: true },
        _meta: { progressToken: token },
      });
      assert(elicitations.length === 0, `elicitation/create reached a client that declared no elicitation: ${brief(elicitations[0]?.msg)}`);
      assertReport(res, 'result');
      const choice = allText(res).match(/Research Report: [^\n]*? \((.*)\)\n/)?.[1];
      assertProgress(rpc.progressFor(token), 'ambiguous call', statusTimeline(choice));
    });
  }

  if (ELICITATION) await check('bridged call: elicitation', async () => {
    const token = 'bridge-ambiguous';
    const before = elicitations.length;
    const res = await rpc.request('tools/call', {
      name: TOOL,
      arguments: { topic: opts.topic, ambiguous: true },
      _meta: { progressToken: token },
    });
    assert(elicitations.length === before + 1, `client got ${elicitations.length - before} elicitation requests, want 1`);
    const { msg, choice, error } = elicitations[before];
    note(`elicitation/create: ${JSON.stringify(msg)}`);
    assert(!error, `unexpected elicitation/create (${error}): ${brief(msg)}`);
    note(`answered accept {"interpretation": ${JSON.stringify(choice)}}`);
    assert(relatedTaskPaths(msg).length === 0, `elicitation/create carries ${relatedTaskPaths(msg).join(', ')}`);
    assert(typeof msg.params?.message === 'string' && msg.params.message.includes(opts.topic), `elicitation message lacks the topic: ${brief(msg.params)}`);
    assertReport(res, 'result', choice);
    assertProgress(rpc.progressFor(token), 'ambiguous call', statusTimeline(choice));
  });

  if (opts.cancel) {
    await check('bridged call: notifications/cancelled', async () => {
      const token = 'bridge-cancelled';
      const call = rpc.send('tools/call', { name: TOOL, arguments: { topic: opts.topic }, _meta: { progressToken: token } });
      let early;
      call.done.then((r) => (early = r), () => {});
      // Cancel once the task runs upstream (its first status reached the client as progress).
      await waitFor(() => rpc.progressFor(token).length > 0 || early, 5000, 'the first progress notification');
      assert(!early, `answered before it was cancelled: ${brief(early)}`);
      rpc.abandon(call.id);
      await rpc.notify('notifications/cancelled', { requestId: call.id, reason: 'interop: cancelled by the client' });
      const sentAt = Date.now();
      await sleep(2500);
      assert(!rpc.answered.has(call.id), `a response after notifications/cancelled: ${brief(rpc.answered.get(call.id))}`);
      // Progress stops with the call (allowing for what was already on its way).
      const late = wire.received.filter(
        ({ at, msg }) => at > sentAt + 200 && msg.method === 'notifications/progress' && msg.params?.progressToken === token,
      );
      assert(late.length === 0, `progress after the cancellation: ${brief(late.map((x) => x.msg.params))}`);
    });
  }

  await check('no task traffic', async () => {
    const bad = taskTraffic();
    assert(bad.length === 0, `received: ${bad.join('; ')}`);
  });

  await check('ping', async () => {
    await rpc.request('ping');
  });
}

// ---------------------------------------------------------------------------
// a 2025-11-25 client: the SDK Client, tasks and all

async function scenarioTasksVersion() {
  const client = new Client(
    { name: 'taskgate-interop-ts-bridge', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } } },
  );
  onShutdown(async () => {
    await client.transport?.terminateSession?.().catch(() => {});
    await client.close().catch(() => {});
  });
  client.onerror = (e) => note(`transport error: ${e?.message || e}`);
  const elicitations = [];
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    const seen = { params: req.params };
    elicitations.push(seen);
    try {
      seen.choice = interpretationChoice(req.params);
    } catch (e) {
      seen.error = e.message;
      throw e;
    }
    return { action: 'accept', content: { interpretation: seen.choice } };
  });
  const callOpts = { timeout: CALL_TIMEOUT_MS };
  const elicitationMsg = (from) => wire.received.slice(from).find(({ msg }) => msg.method === 'elicitation/create')?.msg;

  await check(`initialize: protocol ${LATEST_PROTOCOL_VERSION}`, async () => {
    await client.connect(makeTransport(), callOpts);
    const initResp = wire.received.find(({ msg }) => msg.result?.protocolVersion)?.msg;
    assert(initResp?.result.protocolVersion === LATEST_PROTOCOL_VERSION, `negotiated ${initResp?.result.protocolVersion}, want ${LATEST_PROTOCOL_VERSION}`);
  });

  await check('initialize: capabilities.tasks', async () => {
    const caps = client.getServerCapabilities();
    assert(caps?.tasks, `no capabilities.tasks: ${brief(caps)}`);
    assert(caps.tasks.requests?.tools?.call, `no capabilities.tasks.requests.tools.call: ${brief(caps.tasks)}`);
  });

  await check('tools/list: taskSupport optional', async () => {
    const res = await client.listTools(undefined, callOpts);
    const t = res.tools.find((x) => x.name === TOOL);
    assert(t, `${TOOL} not listed (got: ${res.tools.map((x) => x.name).join(', ')})`);
    assert(t.execution?.taskSupport === 'optional', `${TOOL} has execution ${brief(t.execution)}, want taskSupport "optional"`);
    const required = res.tools.filter((x) => x.execution?.taskSupport === 'required').map((x) => x.name);
    assert(required.length === 0, `tools listed as required: ${required.join(', ')}`);
  });

  // Plain calls: bridged by the gateway exactly as for an older client.
  const plainFrom = wire.received.length;
  await check('plain call: result and progress', async () => {
    const events = [];
    const res = await client.callTool({ name: TOOL, arguments: { topic: opts.topic } }, CallToolResultSchema, {
      ...callOpts,
      onprogress: (p) => events.push(p),
    });
    assertReport(res, 'result');
    assert(relatedTaskPaths(res).length === 0, `result carries ${relatedTaskPaths(res).join(', ')}`);
    // The SDK drops the handler with the response and runs notification handlers a tick
    // after responses, so count progress on the wire, where it arrived before the response.
    const sentCall = wire.sent.filter(({ msg }) => msg.method === 'tools/call').at(-1).msg;
    const token = sentCall.params?._meta?.progressToken;
    assert(token !== undefined, `the SDK sent no progress token: ${brief(sentCall)}`);
    const progress = wire.received.filter(({ msg }) => msg.method === 'notifications/progress' && msg.params?.progressToken === token).map(({ msg }) => msg.params);
    assertProgress(progress, 'plain call', statusTimeline());
  });

  await check('plain call: elicitation', async () => {
    const before = elicitations.length;
    const from = wire.received.length;
    const res = await client.callTool({ name: TOOL, arguments: { topic: opts.topic, ambiguous: true } }, CallToolResultSchema, callOpts);
    assert(elicitations.length === before + 1, `client got ${elicitations.length - before} elicitation requests, want 1`);
    const msg = elicitationMsg(from);
    note(`elicitation/create: ${JSON.stringify(msg)}`);
    assert(relatedTaskPaths(msg).length === 0, `elicitation/create for a plain call carries ${relatedTaskPaths(msg).join(', ')}`);
    assert(!elicitations[before].error, `unexpected elicitation/create (${elicitations[before].error}): ${brief(elicitations[before].params)}`);
    assertReport(res, 'result', elicitations[before].choice);
  });

  await check('plain calls: no task traffic', async () => {
    const bad = taskTraffic(plainFrom);
    assert(bad.length === 0, `received: ${bad.join('; ')}`);
  });

  // Task-augmented calls: server-everything's own tasks, passed through.
  await check('task call: callToolStream', async () => {
    const seq = [];
    const stream = client.experimental.tasks.callToolStream({ name: TOOL, arguments: { topic: opts.topic } }, CallToolResultSchema, {
      ...callOpts,
      task: { ttl: 60000 },
    });
    for await (const m of stream) seq.push(m);
    const shown = seq.map((m) => (m.task ? `${m.type}(${m.task.status})` : m.type)).join(' ');
    note(`callToolStream yielded: ${shown}`);
    const err = seq.find((m) => m.type === 'error');
    assert(!err, `stream yielded error ${err?.error?.code}: ${brief(err?.error?.message)} (sequence: ${shown})`);
    assert(/^taskCreated( taskStatus)+ result$/.test(seq.map((m) => m.type).join(' ')), `sequence ${shown}, want taskCreated, taskStatus..., result`);
    assert(seq[0].task.status === 'working', `taskCreated status ${seq[0].task.status}, want working`);
    assert(seq.at(-2).task.status === 'completed', `last status ${seq.at(-2).task.status}, want completed`);
    const res = seq.at(-1).result;
    assert(res._meta?.[RELATED_TASK_META_KEY]?.taskId === seq[0].task.taskId, `result _meta ${brief(res._meta)}, want related-task ${seq[0].task.taskId}`);
    delete res._meta;
    assertReport(res, 'result');
  });

  await check('task call: elicitation with related-task', async () => {
    const before = elicitations.length;
    const from = wire.received.length;
    const seq = [];
    const stream = client.experimental.tasks.callToolStream(
      { name: TOOL, arguments: { topic: opts.topic, ambiguous: true } },
      CallToolResultSchema,
      { ...callOpts, task: { ttl: 60000 } },
    );
    for await (const m of stream) seq.push(m);
    const shown = seq.map((m) => (m.task ? `${m.type}(${m.task.status})` : m.type)).join(' ');
    note(`callToolStream (ambiguous) yielded: ${shown}`);
    const err = seq.find((m) => m.type === 'error');
    assert(!err, `stream yielded error ${err?.error?.code}: ${brief(err?.error?.message)} (sequence: ${shown})`);
    assert(seq[0]?.type === 'taskCreated' && seq.at(-1).type === 'result', `sequence ${shown}`);
    const taskId = seq[0].task.taskId;
    assert(elicitations.length === before + 1, `client got ${elicitations.length - before} elicitation requests, want 1`);
    const msg = elicitationMsg(from);
    const related = msg?.params?._meta?.[RELATED_TASK_META_KEY];
    assert(related?.taskId === taskId, `elicitation/create _meta ${brief(msg?.params?._meta)}, want related-task ${taskId}`);
    const res = seq.at(-1).result;
    delete res._meta;
    assert(!elicitations[before].error, `unexpected elicitation/create (${elicitations[before].error}): ${brief(elicitations[before].params)}`);
    assertReport(res, 'result', elicitations[before].choice);
  });

  let taskId;
  await check('task call: CreateTaskResult', async () => {
    const res = await client.request(
      { method: 'tools/call', params: { name: TOOL, arguments: { topic: opts.topic }, task: { ttl: 60000 } } },
      CreateTaskResultSchema,
      callOpts,
    );
    taskId = res.task?.taskId;
    assert(typeof taskId === 'string' && taskId, `no taskId: ${brief(res)}`);
    assert(res.task.status === 'working', `status ${res.task.status}, want working`);
  });

  await check('task call: tasks/get', async () => {
    const t = await client.experimental.tasks.getTask(taskId, callOpts);
    assert(t.taskId === taskId, `taskId ${t.taskId}, want ${taskId}`);
    assert(t.status === 'working', `status ${t.status}, want working`);
    assert(STAGES.some((s) => t.statusMessage?.includes(s)), `statusMessage ${brief(t.statusMessage)} names no stage`);
  });

  await check('task call: tasks/result', async () => {
    const res = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, callOpts);
    assert(res._meta?.[RELATED_TASK_META_KEY]?.taskId === taskId, `_meta ${brief(res._meta)}, want related-task ${taskId}`);
    delete res._meta;
    assertReport(res, 'tasks/result');
    const t = await client.experimental.tasks.getTask(taskId, callOpts);
    assert(t.status === 'completed', `tasks/get after tasks/result: status ${t.status}, want completed`);
  });

  if (opts.cancel) {
    await check('plain call: notifications/cancelled', async () => {
      const abort = new AbortController();
      const from = wire.received.length;
      const call = client.callTool({ name: TOOL, arguments: { topic: opts.topic } }, CallToolResultSchema, {
        ...callOpts,
        signal: abort.signal,
        onprogress: () => {},
      });
      call.catch(() => {});
      const sentCall = wire.sent.filter(({ msg }) => msg.method === 'tools/call').at(-1).msg;
      const progressed = () => wire.received.slice(from).some(({ msg }) => msg.method === 'notifications/progress');
      const answered = () => wire.received.slice(from).find(({ msg }) => msg.id === sentCall.id && !msg.method)?.msg;
      await waitFor(() => progressed() || answered(), 5000, 'the first progress notification');
      assert(!answered(), `answered before it was cancelled: ${brief(answered())}`);
      abort.abort('interop: cancelled by the client'); // the SDK sends notifications/cancelled
      await waitFor(() => wire.sent.some(({ msg }) => msg.method === 'notifications/cancelled'), 1000, 'notifications/cancelled to be sent');
      await sleep(2500);
      assert(!answered(), `a response after notifications/cancelled: ${brief(answered())}`);
    });
  }

  await check('ping', async () => {
    await client.ping(callOpts);
  });
}

// ---------------------------------------------------------------------------

await run(SCENARIO, TASKS_VERSION ? scenarioTasksVersion : scenarioOldVersion);
