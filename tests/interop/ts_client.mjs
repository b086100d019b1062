#!/usr/bin/env node
// Interop client peer: the official TypeScript SDK `Client` (pinned in package.json).
//
//   node ts_client.mjs <scenario> [options] --http <url>
//   node ts_client.mjs <scenario> [options] --stdio <command> [args...]
//
// Scenarios: everything (against @modelcontextprotocol/server-everything),
//            tsserver   (against ts_server.mjs),
//            demo       (against taskgate's built-in demo server),
//            pyserver   (against py_server.py: echo, add, progress from `slow`),
//            pyinput    (against py_server.py: `greet` and `trip`, whose elicitations and
//                        roots/list the client answers: server requests mid-call from a
//                        legacy server, or a 2026-07-28 server's input requests as taskgate
//                        relays them),
//            tasks      (2025-11-25 tasks through the SDK's experimental tasks API, against a
//                        server that offers one long-running tool as a task: taskgate in
//                        front of py_server.py or server-everything).
//
// Options (tasks scenario only; defaults fit py_server.py's `slow` tool):
//   --tool <name>          the long-running tool                       (default: slow)
//   --args <json>          its arguments for the calls that complete   (default: {"seconds":1,"steps":3})
//   --cancel-args <json>   its arguments for the call that is cancelled; it must still be
//                          running ~1 s after it starts                (default: {"seconds":30,"steps":30})
//   --expect-text <text>   the completed tool result's text must contain this
//                          (default: "slow done after <args.steps> steps" for --tool slow,
//                          otherwise any non-empty text)
//   --min-progress <n>     progress notifications the streamed task must deliver (default: 2)
//   --ttl <ms>             task.ttl to request                         (default: 60000)
//   --stats-tool <name>    a tool returning JSON {"slow_cancelled": n} (py_server.py's `stats`):
//                          then also check that the upstream saw the cancellation
//   --no-status-notifications
//                          do not require notifications/tasks/status (the spec makes them MAY)
//
// INTEROP_LOG_MESSAGES=1 prints every JSON-RPC message sent (->) and received (<-) to stderr.
//
// Prints one line per check, `ok <check>` or `FAIL <check>: <why>`, stops at the first
// failure (exit 1), and ends with `PASS <scenario>: <n> checks` (exit 0). A global timeout
// (INTEROP_TIMEOUT_MS, default 60000) fails the check that is running and exits 1.
// Usage errors exit 2. (The check runner, command line and message log are in harness.mjs.)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  RELATED_TASK_META_KEY,
  TaskStatusNotificationSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  CALL_TIMEOUT_MS,
  allPages,
  allText,
  assert,
  brief,
  check,
  checkPrompt,
  makeTransport as openTransport,
  makeUsage,
  onShutdown,
  parseCommandLine,
  run,
  sleep,
  waitFor,
} from './harness.mjs';

const USAGE =
  'usage: node ts_client.mjs <everything|tsserver|demo|pyserver> (--http <url> | --stdio <command> [args...])\n' +
  '       node ts_client.mjs tasks [--tool <name>] [--args <json>] [--cancel-args <json>] [--expect-text <text>]\n' +
  '                                [--min-progress <n>] [--ttl <ms>] [--stats-tool <name>] [--no-status-notifications]\n' +
  '                                (--http <url> | --stdio <command> [args...])';
const usage = makeUsage('ts_client', USAGE);

// ---------------------------------------------------------------------------
// arguments

const scenario = process.argv[2];
if (!['everything', 'tsserver', 'demo', 'pyserver', 'pyinput', 'tasks'].includes(scenario)) usage();

// Scenario options come between the scenario and --http/--stdio.
const opts = {
  tool: 'slow',
  args: { seconds: 1, steps: 3 },
  cancelArgs: { seconds: 30, steps: 30 },
  expectText: undefined,
  minProgress: 2,
  ttl: 60000,
  statsTool: undefined,
  statusNotifications: true,
};
const jsonOf = (flag, v) => {
  try {
    const parsed = JSON.parse(v);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    return parsed;
  } catch (e) {
    return usage(`${flag} must be a JSON object: ${e.message}`);
  }
};
const intOf = (flag, v, min) => {
  if (!/^\d+$/.test(v) || Number(v) < min) usage(`${flag} must be an integer >= ${min}`);
  return Number(v);
};
const cmdline = parseCommandLine(process.argv.slice(3), usage, (flag, value) => {
  if (scenario !== 'tasks') usage(`option ${flag} is for the tasks scenario only`);
  switch (flag) {
    case '--tool':
      opts.tool = value();
      break;
    case '--args':
      opts.args = jsonOf(flag, value());
      break;
    case '--cancel-args':
      opts.cancelArgs = jsonOf(flag, value());
      break;
    case '--expect-text':
      opts.expectText = value();
      break;
    case '--min-progress':
      opts.minProgress = intOf(flag, value(), 0);
      break;
    case '--ttl':
      opts.ttl = intOf(flag, value(), 1);
      break;
    case '--stats-tool':
      opts.statsTool = value();
      break;
    case '--no-status-notifications':
      opts.statusNotifications = false;
      break;
    default:
      usage(`unknown option ${flag}`);
  }
});
if (opts.expectText === undefined && opts.tool === 'slow') {
  opts.expectText = `slow done after ${opts.args.steps ?? 3} steps`;
}

// ---------------------------------------------------------------------------
// client with the capabilities every scenario relies on

const seen = { sampling: [], elicitation: [], roots: 0, logs: [], taskStatus: [] };

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

const client = new Client(
  { name: 'taskgate-interop-ts-client', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);
onShutdown(() =>
  Promise.resolve()
    // Over HTTP, end the session (DELETE) so the server can release it at once.
    .then(() => client.transport?.terminateSession?.())
    .catch(() => {})
    .then(() => client.close()),
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

client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
  seen.taskStatus.push(n.params);
});

client.onerror = (e) => {
  // Transport-level errors are reported on stderr; a check fails if they matter.
  console.error(`ts_client: transport error: ${e?.message || e}`);
};

// What the initialize response said (captured from the wire: the Client does not expose the
// negotiated version over stdio).
const wire = { protocolVersion: undefined, initializeId: undefined };

// Records the negotiated protocol version off the wire (and, with INTEROP_LOG_MESSAGES=1,
// prints every JSON-RPC message on stderr).
const makeTransport = () =>
  openTransport('ts_client', cmdline, {
    onSend: (msg) => {
      if (msg?.method === 'initialize') wire.initializeId = msg.id;
    },
    onReceive: (msg) => {
      if (wire.initializeId !== undefined && msg?.id === wire.initializeId && msg.result) {
        wire.protocolVersion = msg.result.protocolVersion;
      }
    },
  });

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
  await checkPrompt(client, 'simple-prompt', undefined, 'simple prompt');
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
  await checkPrompt(client, 'greet', { name: 'interop' }, 'interop');
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
  await checkPrompt(client, 'greet', { name: 'interop' }, 'interop');
  await checkPing();
}

async function scenarioPyServer() {
  await checkConnect();
  await checkToolsListed(['echo', 'add', 'slow', 'stats']);
  await check('tools/call echo', async () => {
    const res = await callTool('echo', { text: 'hello py_server' });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(allText(res) === 'hello py_server', `unexpected echo text: ${brief(allText(res))}`);
  });
  await check('tools/call add', async () => {
    const res = await callTool('add', { a: 2, b: 3 });
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(allText(res).trim() === '5', `2 + 3 gave ${brief(allText(res))}`);
  });
  await checkProgress('progress', 'slow', { seconds: 0.6, steps: 3 }, 2);
  await checkPing();
}

async function scenarioPyInput() {
  await checkConnect();
  await checkToolsListed(['greet', 'trip']);
  await check('tools/call greet (one elicitation)', async () => {
    const before = seen.elicitation.length;
    const res = await callTool('greet', {});
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    assert(seen.elicitation.length === before + 1, `asked ${seen.elicitation.length - before} elicitations, want 1`);
    const asked = seen.elicitation[before];
    assert(asked.params.message === 'What is your name?', `elicitation message ${brief(asked.params.message)}`);
    assert(allText(res) === `hello ${asked.content.name}`, `unexpected greeting ${brief(allText(res))}`);
  });
  await check('tools/call trip (two rounds: name and roots, then city)', async () => {
    const before = seen.elicitation.length;
    const roots = seen.roots;
    const res = await callTool('trip', {});
    assert(!res.isError, `isError: ${brief(allText(res))}`);
    const asked = seen.elicitation.slice(before);
    assert(asked.length === 2, `asked ${asked.length} elicitations, want 2`);
    assert(seen.roots === roots + 1, `roots/list asked ${seen.roots - roots} times, want 1`);
    const name = asked[0].content.name;
    assert(asked[1].params.message === `Where to, ${name}?`, `second question ${brief(asked[1].params.message)}`);
    const want = `${name} goes to ${asked[1].content.city} with 1 roots`;
    assert(allText(res) === want, `got ${brief(allText(res))}, want ${brief(want)}`);
  });
  await checkPing();
}

// ---------------------------------------------------------------------------
// tasks (2025-11-25, SEP-1686) through the SDK's experimental client API

const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'];
const TERMINAL = ['completed', 'failed', 'cancelled'];
const UNKNOWN_TASK_ID = 'taskgate-interop-no-such-task';

// The fields every Task carries (schema 2025-11-25), checked on the object as the SDK parsed it.
function assertTask(task, what) {
  assert(task && typeof task === 'object', `${what}: no task object: ${brief(task)}`);
  assert(typeof task.taskId === 'string' && task.taskId.length > 0, `${what}: no taskId: ${brief(task)}`);
  assert(TASK_STATUSES.includes(task.status), `${what}: unknown status ${brief(task.status)}`);
  for (const k of ['createdAt', 'lastUpdatedAt']) {
    assert(typeof task[k] === 'string' && !Number.isNaN(Date.parse(task[k])), `${what}: ${k} ${brief(task[k])} is not an ISO 8601 time`);
  }
  assert(task.ttl === null || typeof task.ttl === 'number', `${what}: ttl ${brief(task.ttl)} is neither a number nor null`);
}

// Resolves to the JSON-RPC error of a request that must fail with `code`.
async function expectRpcError(promise, code) {
  let res;
  try {
    res = await promise;
  } catch (e) {
    assert(e?.code === code, `got error ${e?.code} (${brief(e?.message)}), want ${code}`);
    return e;
  }
  throw new Error(`succeeded with ${brief(res)}, want error ${code}`);
}

function assertToolText(res, what) {
  assert(res && Array.isArray(res.content), `${what}: not a CallToolResult: ${brief(res)}`);
  assert(!res.isError, `${what}: isError: ${brief(allText(res))}`);
  const text = allText(res);
  if (opts.expectText !== undefined) {
    assert(text.includes(opts.expectText), `${what}: text lacks "${opts.expectText}": ${brief(text)}`);
  } else {
    assert(text.length > 0, `${what}: no text content: ${brief(res)}`);
  }
}

async function scenarioTasks() {
  const { tool, args, ttl } = opts;
  const callOpts = { timeout: CALL_TIMEOUT_MS };
  const createTask = (toolArgs) =>
    client.request(
      { method: 'tools/call', params: { name: tool, arguments: toolArgs, task: { ttl } } },
      CreateTaskResultSchema,
      callOpts,
    );
  const slowCancelled = async () => {
    const res = await callTool(opts.statsTool, {});
    const n = JSON.parse(allText(res)).slow_cancelled;
    assert(typeof n === 'number', `${opts.statsTool} gave no slow_cancelled: ${brief(allText(res))}`);
    return n;
  };

  await checkConnect();
  await check('initialize: capabilities.tasks', async () => {
    assert(wire.protocolVersion === '2025-11-25', `negotiated protocol version ${wire.protocolVersion}, want 2025-11-25`);
    const caps = client.getServerCapabilities();
    assert(caps?.tasks?.requests?.tools?.call, `no capabilities.tasks.requests.tools.call: ${brief(caps)}`);
    assert(caps.tasks.list, `no capabilities.tasks.list: ${brief(caps.tasks)}`);
    assert(caps.tasks.cancel, `no capabilities.tasks.cancel: ${brief(caps.tasks)}`);
  });

  await check('tools/list: taskSupport optional', async () => {
    const res = await client.listTools(undefined, callOpts);
    const t = res.tools.find((x) => x.name === tool);
    assert(t, `tool ${tool} not listed (got: ${res.tools.map((x) => x.name).join(', ')})`);
    assert(t.execution?.taskSupport === 'optional', `${tool} has execution ${brief(t.execution)}, want taskSupport "optional"`);
  });

  // callToolStream: tools/call with params.task -> CreateTaskResult, then tasks/get every
  // pollInterval until terminal, then tasks/result (see README.md).
  const messages = [];
  const progress = [];
  let streamId;
  await check('callToolStream', async () => {
    const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: args }, CallToolResultSchema, {
      task: { ttl },
      timeout: CALL_TIMEOUT_MS,
      onprogress: (p) => progress.push(p),
    });
    for await (const m of stream) messages.push(m);
    const seq = messages.map((m) => (m.task ? `${m.type}(${m.task.status})` : m.type)).join(' ');
    console.error(`ts_client: callToolStream yielded: ${seq}`);
    const err = messages.find((m) => m.type === 'error');
    assert(!err, `stream yielded error ${err?.error?.code}: ${brief(err?.error?.message)} (sequence: ${seq})`);
    const types = messages.map((m) => m.type).join(' ');
    assert(/^taskCreated( taskStatus)+ result$/.test(types), `sequence ${seq}, want taskCreated, taskStatus..., result`);
    const created = messages[0].task;
    assertTask(created, 'taskCreated');
    assert(created.status === 'working', `taskCreated status ${created.status}, want working`);
    streamId = created.taskId;
    for (const m of messages.slice(1, -1)) {
      assert(m.task.taskId === streamId, `taskStatus for ${m.task.taskId}, want ${streamId}`);
      assertTask(m.task, 'taskStatus');
    }
    // The SDK stops polling at a terminal status, and also at input_required: then it blocks
    // in tasks/result (delivering input requests) and yields that result.
    const last = messages.at(-2).task.status;
    assert(['completed', 'input_required'].includes(last), `last taskStatus ${last}, want completed (or input_required)`);
    assertToolText(messages.at(-1).result, 'result');
  });

  await check('task progress', async () => {
    // Progress arrives while the task runs; over HTTP it may travel on another stream than
    // the polls, so allow it a moment.
    await waitFor(() => progress.length >= opts.minProgress, 2000, `${opts.minProgress} progress notifications (got ${progress.length})`);
    for (let i = 1; i < progress.length; i++) {
      assert(progress[i].progress > progress[i - 1].progress, `progress not increasing: ${progress.map((p) => p.progress).join(', ')}`);
    }
  });

  await check('callToolStream without options.task', async () => {
    // The SDK adds params.task ({}: no ttl) by itself for a tool that tools/list showed with
    // taskSupport optional/required on a server with capabilities.tasks.requests.tools.call.
    const seen2 = [];
    const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: args }, CallToolResultSchema, {
      timeout: CALL_TIMEOUT_MS,
    });
    for await (const m of stream) seen2.push(m);
    const seq = seen2.map((m) => (m.task ? `${m.type}(${m.task.status})` : m.type)).join(' ');
    const err = seen2.find((m) => m.type === 'error');
    assert(!err, `stream yielded error ${err?.error?.code}: ${brief(err?.error?.message)} (sequence: ${seq})`);
    assert(/^taskCreated( taskStatus)+ result$/.test(seen2.map((m) => m.type).join(' ')), `sequence ${seq}, want a task`);
    const created = seen2[0].task;
    assert(created.taskId !== streamId, `taskId ${created.taskId} reused`);
    assert(typeof created.ttl === 'number' || created.ttl === null, `ttl ${brief(created.ttl)} for a task created without ttl`);
    assertToolText(seen2.at(-1).result, 'result');
  });

  let raw;
  await check('tools/call with task: CreateTaskResult', async () => {
    const res = await createTask(args);
    raw = res.task;
    assertTask(raw, 'task');
    assert(raw.status === 'working', `status ${raw.status}, want working`);
    assert(typeof raw.ttl === 'number', `ttl ${brief(raw.ttl)}, want a number`);
    assert(typeof raw.pollInterval === 'number', `pollInterval ${brief(raw.pollInterval)}, want a number`);
    assert(raw.taskId !== streamId, `taskId ${raw.taskId} reused`);
  });

  await check('tasks/get', async () => {
    const t = await client.experimental.tasks.getTask(raw.taskId, callOpts);
    assertTask(t, 'tasks/get');
    assert(t.taskId === raw.taskId, `taskId ${t.taskId}, want ${raw.taskId}`);
    assert(['working', 'completed'].includes(t.status), `status ${t.status}, want working or completed`);
  });

  await check('tasks/result', async () => {
    const res = await client.experimental.tasks.getTaskResult(raw.taskId, CallToolResultSchema, callOpts);
    assertToolText(res, 'tasks/result');
    const related = res._meta?.[RELATED_TASK_META_KEY];
    assert(related?.taskId === raw.taskId, `_meta["${RELATED_TASK_META_KEY}"] is ${brief(related)}, want {taskId: ${raw.taskId}}`);
  });

  await check('tasks/get after tasks/result', async () => {
    const t = await client.experimental.tasks.getTask(raw.taskId, callOpts);
    assert(t.status === 'completed', `status ${t.status}, want completed`);
  });

  await check('tasks/list', async () => {
    const tasks = await allPages('tasks', (cursor) => client.experimental.tasks.listTasks(cursor, callOpts));
    const ids = tasks.map((t) => t.taskId);
    assert(new Set(ids).size === ids.length, `duplicate task ids: ${brief(ids)}`);
    for (const id of [streamId, raw.taskId]) {
      const t = tasks.find((x) => x.taskId === id);
      assert(t, `task ${id} not listed (got: ${brief(ids)})`);
      assertTask(t, `listed task ${id}`);
      assert(t.status === 'completed', `listed task ${id} has status ${t.status}, want completed`);
    }
  });

  let doomed;
  let cancelledBefore;
  await check('tasks/cancel', async () => {
    if (opts.statsTool) cancelledBefore = await slowCancelled();
    const res = await createTask(opts.cancelArgs);
    doomed = res.task.taskId;
    assert(res.task.status === 'working', `new task has status ${res.task.status}, want working`);
    await sleep(500); // let the upstream call get going
    const t = await client.experimental.tasks.getTask(doomed, callOpts);
    assert(t.status === 'working', `before cancel: status ${t.status}, want working (are --cancel-args long enough?)`);
    const c = await client.experimental.tasks.cancelTask(doomed, callOpts);
    assert(c.taskId === doomed, `cancel answered for ${c.taskId}, want ${doomed}`);
    assertTask(c, 'tasks/cancel');
    assert(c.status === 'cancelled', `status ${c.status}, want cancelled`);
  });

  await check('tasks/get after tasks/cancel', async () => {
    await sleep(300);
    const t = await client.experimental.tasks.getTask(doomed, callOpts);
    assert(t.status === 'cancelled', `status ${t.status}, want cancelled`);
  });

  if (opts.statsTool) {
    await check('upstream saw notifications/cancelled', async () => {
      let now = cancelledBefore;
      const end = Date.now() + 5000;
      while (now <= cancelledBefore && Date.now() < end) {
        await sleep(200);
        now = await slowCancelled();
      }
      assert(now > cancelledBefore, `upstream's slow_cancelled stayed at ${now} for 5 s`);
    });
  }

  await check('tasks/cancel of a completed task: -32602', async () => {
    await expectRpcError(client.experimental.tasks.cancelTask(raw.taskId, callOpts), -32602);
  });

  await check('tasks/get of an unknown task: -32602', async () => {
    await expectRpcError(client.experimental.tasks.getTask(UNKNOWN_TASK_ID, callOpts), -32602);
  });

  await check('tasks/result of an unknown task: -32602', async () => {
    await expectRpcError(client.experimental.tasks.getTaskResult(UNKNOWN_TASK_ID, CallToolResultSchema, callOpts), -32602);
  });

  await check('tasks/cancel of an unknown task: -32602', async () => {
    await expectRpcError(client.experimental.tasks.cancelTask(UNKNOWN_TASK_ID, callOpts), -32602);
  });

  if (opts.statusNotifications) {
    await check('notifications/tasks/status', async () => {
      // One per status change: the two completed tasks and the cancelled one must have been
      // announced, and nothing may follow a terminal status.
      const has = (id, status) => seen.taskStatus.some((n) => n.taskId === id && n.status === status);
      const summary = () => brief(seen.taskStatus.map((n) => `${n.taskId}:${n.status}`));
      await waitFor(
        () => has(streamId, 'completed') && has(raw.taskId, 'completed') && has(doomed, 'cancelled'),
        3000,
        `status notifications completed/completed/cancelled (got: ${summary()})`,
      );
      await sleep(300); // a late, wrong notification would show up here
      for (const n of seen.taskStatus) assertTask(n, 'notifications/tasks/status');
      for (const id of [streamId, raw.taskId, doomed]) {
        const statuses = seen.taskStatus.filter((n) => n.taskId === id).map((n) => n.status);
        const end = statuses.findIndex((st) => TERMINAL.includes(st));
        assert(end === statuses.length - 1, `task ${id} statuses ${statuses.join(' -> ')}: something after the terminal status`);
      }
    });
  }

  await checkPing();
}

// ---------------------------------------------------------------------------

const scenarios = {
  everything: scenarioEverything,
  tsserver: scenarioTsServer,
  demo: scenarioDemo,
  pyserver: scenarioPyServer,
  pyinput: scenarioPyInput,
  tasks: scenarioTasks,
};

await run(scenario, scenarios[scenario]);
