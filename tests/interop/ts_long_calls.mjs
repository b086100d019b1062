#!/usr/bin/env node
// Interop client peer for long calls (`[upstream.long_calls]`): the official TypeScript SDK
// `Client`, a client without tasks (it declares no `tasks` capability), with a request timeout
// far shorter than the tool it calls. Written for taskgate in front of its built-in demo
// (`slow {duration_ms, steps}` answers `done after <steps> steps`) with `defer_after` and
// `wait_max` both shorter than the client's timeout.
//
//   node ts_long_calls.mjs [longcalls] [options] --http <url>
//   node ts_long_calls.mjs [longcalls] [options] --stdio <command> [args...]
//
// (The scenario word `longcalls` is optional: it lets a harness call every script alike.)
//
// Options:
//   --timeout-ms <n>    the timeout of every request the client sends (default: 2000)
//   --duration-ms <n>   how long the `slow` call that completes runs (default: 6000)
//   --steps <n>         its progress steps (default: 3)
//   --max-waits <n>     the most wait calls one result may take before the check fails (default: 20)
//
// The flow is the one a model would follow: list the tools, call `slow`, read the answer's
// `structuredContent` (`taskId`, `waitTool`), call the wait tool with `{taskId}` until the
// answer is the tool's own result. Then a call is stopped with the cancel tool, and a second
// session (a second `Client`, a new connection) is refused another session's task id the
// way it is refused an id that never was.
//
// Besides the checks, prints `figure deferred_ms <n>` (the call to its deferred answer),
// `figure waits <n>` (wait calls until the result) and `figure result_ms <n>` (the call to
// its result), one a line.
//
// INTEROP_LOG_MESSAGES=1 prints every JSON-RPC message sent (->) and received (<-) to stderr.
//
// Prints one line per check, `ok <check>` or `FAIL <check>: <why>`, stops at the first
// failure (exit 1), and ends with `PASS longcalls: <n> checks` (exit 0). A global timeout
// (INTEROP_TIMEOUT_MS, default 60000) fails the check that is running and exits 1.
// Usage errors exit 2. (The check runner, command line and message log are in harness.mjs.)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
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
} from './harness.mjs';

const USAGE =
  'usage: node ts_long_calls.mjs [longcalls] [--timeout-ms <n>] [--duration-ms <n>] [--steps <n>] [--max-waits <n>]\n' +
  '                              (--http <url> | --stdio <command> [args...])';
const SCENARIO = 'longcalls';
const usage = makeUsage('ts_long_calls', USAGE);

// ---------------------------------------------------------------------------
// arguments

const opts = { timeoutMs: 2000, durationMs: 6000, steps: 3, maxWaits: 20 };
const intOf = (flag, v, min) => {
  if (!/^\d+$/.test(v) || Number(v) < min) usage(`${flag} must be an integer >= ${min}`);
  return Number(v);
};
let argv = process.argv.slice(2);
if (argv[0] === SCENARIO) argv = argv.slice(1);
const cmdline = parseCommandLine(argv, usage, (flag, value) => {
  switch (flag) {
    case '--timeout-ms':
      opts.timeoutMs = intOf(flag, value(), 1);
      break;
    case '--duration-ms':
      opts.durationMs = intOf(flag, value(), 1);
      break;
    case '--steps':
      opts.steps = intOf(flag, value(), 1);
      break;
    case '--max-waits':
      opts.maxWaits = intOf(flag, value(), 1);
      break;
    default:
      usage(`unknown option ${flag}`);
  }
});
// A call that must still be running when it is cancelled or looked at from another session.
const LONG = { duration_ms: 30000, steps: 30 };
const UNKNOWN_TASK_ID = 'taskgate-interop-no-such-task';

// ---------------------------------------------------------------------------
// clients: each its own connection (over HTTP its own session, over stdio its own process)

const clients = [];
const wire = { protocolVersion: undefined, initializeId: undefined, capabilities: undefined };

function newClient() {
  const c = new Client({ name: 'taskgate-interop-ts-long-calls', version: '1.0.0' }, { capabilities: {} });
  c.onerror = (e) => console.error(`ts_long_calls: transport error: ${e?.message || e}`);
  clients.push(c);
  return c;
}

onShutdown(() =>
  Promise.all(
    clients.map((c) =>
      Promise.resolve()
        // Over HTTP, end the session (DELETE) so the server can release it at once.
        .then(() => c.transport?.terminateSession?.())
        .catch(() => {})
        .then(() => c.close())
        .catch(() => {}),
    ),
  ),
);

// The first client's initialize, as sent and as answered (the SDK shows neither over stdio).
const makeTransport = (watch) =>
  openTransport(
    'ts_long_calls',
    cmdline,
    watch
      ? {
          onSend: (msg) => {
            if (msg?.method === 'initialize') {
              wire.initializeId = msg.id;
              wire.capabilities = msg.params?.capabilities;
            }
          },
          onReceive: (msg) => {
            if (wire.initializeId !== undefined && msg?.id === wire.initializeId && msg.result) {
              wire.protocolVersion = msg.result.protocolVersion;
            }
          },
        }
      : undefined,
  );

const requestOpts = () => ({ timeout: opts.timeoutMs });
const call = (c, name, args) => c.callTool({ name, arguments: args }, CallToolResultSchema, requestOpts());

// A "still running" answer: checks its shape, returns its structuredContent.
function stillRunning(res, what, taskId) {
  assert(!res.isError, `${what}: isError: ${brief(res)}`);
  const sc = res.structuredContent;
  assert(sc && typeof sc.taskId === 'string' && sc.taskId.length > 0, `${what}: no structuredContent.taskId: ${brief(res)}`);
  if (taskId !== undefined) assert(sc.taskId === taskId, `${what}: taskId ${sc.taskId}, want ${taskId}`);
  assert(sc.status === 'working', `${what}: status ${sc.status}, want working`);
  assert(typeof sc.waitTool === 'string' && sc.waitTool.length > 0, `${what}: no structuredContent.waitTool: ${brief(sc)}`);
  const text = allText(res);
  assert(text.includes(sc.taskId) && text.includes(sc.waitTool), `${what}: text names neither the task nor ${sc.waitTool}: ${brief(text)}`);
  return sc;
}

// The JSON-RPC error of a request that must fail.
async function rpcError(promise, what) {
  let res;
  try {
    res = await promise;
  } catch (e) {
    assert(typeof e?.code === 'number', `${what}: threw without a JSON-RPC code: ${brief(e?.message || e)}`);
    return e;
  }
  throw new Error(`${what}: succeeded with ${brief(res)}, want a JSON-RPC error`);
}

// The demo's count of calls it was told to stop (resource demo://stats).
async function demoCancelled(c) {
  const res = await c.readResource({ uri: 'demo://stats' }, requestOpts());
  return JSON.parse(res.contents[0].text).cancelled;
}

// ---------------------------------------------------------------------------

async function scenario() {
  const client = newClient();
  const tools = { wait: undefined, status: 'taskgate_status', cancel: 'taskgate_cancel' };

  await check('initialize: a client without tasks', async () => {
    await client.connect(makeTransport(true), requestOpts());
    assert(wire.protocolVersion, 'no initialize response seen');
    assert(wire.capabilities && wire.capabilities.tasks === undefined, `client declared ${brief(wire.capabilities)}`);
    console.error(`ts_long_calls: negotiated ${wire.protocolVersion}`);
  });

  await check('tools/list: slow and the gateway tools, on the last page', async () => {
    const pages = [];
    const all = await allPages('tools', async (cursor) => {
      const page = await client.listTools(cursor ? { cursor } : undefined, requestOpts());
      pages.push(page.tools.map((t) => t.name));
      return page;
    });
    const names = all.map((t) => t.name);
    for (const n of ['slow', 'taskgate_wait', 'taskgate_status', 'taskgate_cancel']) {
      assert(names.includes(n), `${n} not listed (got: ${names.join(', ')})`);
    }
    assert(pages.at(-1).includes('taskgate_wait'), `taskgate_wait not on the last page: ${brief(pages)}`);
    for (const n of ['taskgate_wait', 'taskgate_status', 'taskgate_cancel']) {
      const t = all.find((x) => x.name === n);
      assert(t.inputSchema?.required?.includes('taskId'), `${n} does not require taskId: ${brief(t.inputSchema)}`);
    }
  });

  // The model-shaped flow.
  const args = { duration_ms: opts.durationMs, steps: opts.steps };
  let task;
  let started;
  await check(`tools/call slow ${opts.durationMs} ms: a deferred answer within the ${opts.timeoutMs} ms timeout`, async () => {
    started = Date.now();
    const res = await call(client, 'slow', args);
    const took = Date.now() - started;
    const sc = stillRunning(res, 'the call');
    task = sc.taskId;
    tools.wait = sc.waitTool;
    assert(took < opts.timeoutMs, `answered after ${took} ms`);
    console.log(`figure deferred_ms ${took}`);
  });

  await check('taskgate_status: working', async () => {
    const res = await call(client, tools.status, { taskId: task });
    assert(!res.isError, `isError: ${brief(res)}`);
    assert(res.structuredContent?.taskId === task, `taskId ${brief(res.structuredContent)}`);
    assert(res.structuredContent.status === 'working', `status ${res.structuredContent.status}, want working`);
  });

  let result;
  await check('taskgate_wait until the result', async () => {
    let waits = 0;
    for (;;) {
      assert(waits < opts.maxWaits, `no result after ${waits} waits`);
      const res = await call(client, tools.wait, { taskId: task });
      waits += 1;
      if (res.structuredContent?.taskId === undefined) {
        result = res;
        break;
      }
      stillRunning(res, `wait ${waits}`, task);
    }
    const took = Date.now() - started;
    console.log(`figure waits ${waits}`);
    console.log(`figure result_ms ${took}`);
    assert(took >= opts.durationMs, `the result after ${took} ms, before the tool's ${opts.durationMs} ms`);
  });

  await check('the result is the tool\'s own', async () => {
    const want = { content: [{ type: 'text', text: `done after ${opts.steps} steps` }] };
    assert(JSON.stringify(result) === JSON.stringify(want), `got ${brief(result)}, want ${brief(want)}`);
  });

  await check('taskgate_wait again: the same result', async () => {
    const res = await call(client, tools.wait, { taskId: task });
    assert(JSON.stringify(res) === JSON.stringify(result), `got ${brief(res)}, want ${brief(result)}`);
  });

  let doomed;
  let cancelledBefore;
  await check('taskgate_cancel stops a deferred call', async () => {
    cancelledBefore = await demoCancelled(client);
    doomed = stillRunning(await call(client, 'slow', LONG), 'the long call').taskId;
    assert(doomed !== task, `taskId ${doomed} reused`);
    const res = await call(client, tools.cancel, { taskId: doomed });
    assert(!res.isError, `isError: ${brief(res)}`);
    assert(res.structuredContent?.taskId === doomed, `cancelled ${brief(res.structuredContent)}, want ${doomed}`);
    assert(res.structuredContent.status === 'cancelled', `status ${res.structuredContent.status}, want cancelled`);
  });

  await check('taskgate_status after the cancel: cancelled', async () => {
    const res = await call(client, tools.status, { taskId: doomed });
    assert(res.structuredContent?.status === 'cancelled', `got ${brief(res)}`);
  });

  await check('the upstream call was stopped', async () => {
    const end = Date.now() + 5000;
    let now = await demoCancelled(client);
    while (now <= cancelledBefore && Date.now() < end) {
      await sleep(100);
      now = await demoCancelled(client);
    }
    assert(now > cancelledBefore, `demo://stats cancelled stayed at ${now} for 5 s`);
  });

  await check('taskgate_wait of the cancelled call: a JSON-RPC error', async () => {
    const e = await rpcError(call(client, tools.wait, { taskId: doomed }), 'wait');
    console.error(`ts_long_calls: the cancelled call's wait: ${e.code} ${e.message}`);
  });

  await check('taskgate_cancel again: a tool error', async () => {
    const res = await call(client, tools.cancel, { taskId: doomed });
    assert(res.isError === true, `got ${brief(res)}`);
  });

  await check('an unknown task id: a tool error for each tool', async () => {
    for (const name of [tools.wait, tools.status, tools.cancel]) {
      const res = await call(client, name, { taskId: UNKNOWN_TASK_ID });
      assert(res.isError === true, `${name}: ${brief(res)}`);
      assert(allText(res).includes(UNKNOWN_TASK_ID), `${name}: text does not name the id: ${brief(res)}`);
    }
  });

  // Another session.
  let running;
  await check('another session: refused as an unknown id', async () => {
    running = stillRunning(await call(client, 'slow', LONG), 'a long call').taskId;
    const other = newClient();
    await other.connect(makeTransport(false), requestOpts());
    for (const name of [tools.wait, tools.status, tools.cancel]) {
      const theirs = await call(other, name, { taskId: running });
      const never = await call(other, name, { taskId: UNKNOWN_TASK_ID });
      assert(theirs.isError === true, `${name} of another session's task: ${brief(theirs)}`);
      const a = allText(theirs).replaceAll(running, 'X');
      const b = allText(never).replaceAll(UNKNOWN_TASK_ID, 'X');
      assert(a === b, `${name}: ${brief(a)} differs from the unknown id's ${brief(b)}`);
    }
  });

  await check('the task the other session named still runs, then is cancelled', async () => {
    const st = await call(client, tools.status, { taskId: running });
    assert(st.structuredContent?.status === 'working', `status ${brief(st)}`);
    const res = await call(client, tools.cancel, { taskId: running });
    assert(res.structuredContent?.status === 'cancelled', `cancel: ${brief(res)}`);
  });

  await check('ping', async () => {
    await client.ping(requestOpts());
  });
}

await run(SCENARIO, scenario);
