// The check runner, command line and shared checks of the Node interop clients (ts_client.mjs,
// ts_bridge.mjs, ts_sse_client.mjs). Importing it arms the run:
//
//   - each `check(name, fn)` prints `ok <name>`; the first that throws prints
//     `FAIL <name>: <why>` (white space folded to single spaces) and exits 1;
//   - `run(scenario, fn)` runs the checks and ends with `PASS <scenario>: <n> checks`, exit 0;
//   - a global timeout (INTEROP_TIMEOUT_MS, default 60000), an unhandled rejection or an
//     uncaught exception fails the check that is running (exit 1);
//   - before exiting, the closer given to `onShutdown` ends the connection (at most 3 s);
//   - usage errors exit 2 (`makeUsage`);
//   - INTEROP_LOG_MESSAGES=1: transports from `makeTransport` print every JSON-RPC message
//     sent (->) and received (<-) on stderr, with the milliseconds since the transport was made.

import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const LOG_MESSAGES = process.env.INTEROP_LOG_MESSAGES === '1';
export const TIMEOUT_MS = Number(process.env.INTEROP_TIMEOUT_MS || 60000);
export const CALL_TIMEOUT_MS = 30000; // per request; the global timeout bounds the whole run

// ---------------------------------------------------------------------------
// check runner

let current = 'startup';
let passed = 0;
let finished = false;
let closeConnection = async () => {};

// What shutdown runs to end the connection (end an HTTP session, kill a stdio child).
export function onShutdown(close) {
  closeConnection = close;
}

export function fail(name, why) {
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
    .then(() => closeConnection())
    .catch(() => {})
    .finally(done);
}

const globalTimer = setTimeout(() => fail(current, `global timeout after ${TIMEOUT_MS} ms`), TIMEOUT_MS);
process.on('unhandledRejection', (e) => fail(current, `unhandled rejection: ${e?.stack || e}`));
process.on('uncaughtException', (e) => fail(current, `uncaught exception: ${e?.stack || e}`));

export async function check(name, fn) {
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

// Runs a scenario's checks: `PASS <scenario>: <n> checks` and exit 0, or the running check fails.
export async function run(scenario, fn) {
  try {
    await fn();
    finished = true;
    clearTimeout(globalTimer);
    console.log(`PASS ${scenario}: ${passed} checks`);
    shutdown(0);
  } catch (e) {
    fail(current, e?.stack || e);
  }
}

export function assert(cond, why) {
  if (!cond) throw new Error(why);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(pred, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return;
    await sleep(25);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

// Every item of a paginated list: `fetchPage(cursor)` (cursor undefined for the first page)
// resolves to a page whose items are under `key`; pages follow `nextCursor`, at most 100.
export async function allPages(key, fetchPage) {
  const items = [];
  let cursor;
  for (let page = 0; ; page++) {
    assert(page < 100, 'more than 100 pages');
    const res = await fetchPage(cursor);
    items.push(...res[key]);
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  return items;
}

// The text blocks of a tool result, one a line.
export function allText(result) {
  return (result?.content || [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

// A value for a message: a string as it is, anything else as JSON, cut at 300 characters.
export const brief = (v) => {
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  return s.length > 300 ? `${s.slice(0, 300)}...` : s;
};

// ---------------------------------------------------------------------------
// checks the SDK clients share (any SDK version's `Client`)

// Checks `prompts/list` names the prompt `name` and `prompts/get` with `args` gives it text
// that contains `wantText`.
export async function checkPrompt(client, name, args, wantText) {
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
// command line: [options] (--http <url> | --stdio <command> [args...])

// A usage(why) for `prog`: prints `<prog>: <why>` (if given) and the usage text, exits 2.
export function makeUsage(prog, text) {
  return (why) => {
    if (why) console.error(`${prog}: ${why}`);
    console.error(text);
    process.exit(2);
  };
}

// Reads the options before --http/--stdio, then the target. `option(flag, value)` handles one
// option: `value()` takes the argument after the flag (usage error if there is none); a flag
// whose handler takes no value is a switch. Returns {mode: '--http'|'--stdio', target}, target
// being [url] or [command, ...args].
export function parseCommandLine(argv, usage, option) {
  const transports = ['--http', '--stdio'];
  while (argv.length && !transports.includes(argv[0])) {
    const flag = argv[0];
    let took = false;
    const value = () => {
      if (argv.length < 2) usage(`${flag} needs a value`);
      took = true;
      const v = argv[1];
      argv = argv.slice(2);
      return v;
    };
    option(flag, value);
    if (!took) argv = argv.slice(1);
  }
  const mode = argv[0];
  if (!transports.includes(mode) || argv.length < 2) usage();
  if (mode === '--http' && argv.length !== 2) usage();
  return { mode, target: argv.slice(1) };
}

// ---------------------------------------------------------------------------
// transports

// Taps a transport: `onSend(msg)` / `onReceive(msg)` see every message before it goes out / before
// the SDK handles it, and with INTEROP_LOG_MESSAGES=1 it is printed on stderr as
// `<prog>: +<ms>ms -> <json>` (`<-` for received ones).
function tap(transport, prog, { onSend = () => {}, onReceive = () => {} } = {}) {
  const t0 = Date.now();
  const log = (dir, msg) => {
    if (LOG_MESSAGES) console.error(`${prog}: +${String(Date.now() - t0).padStart(5)}ms ${dir} ${JSON.stringify(msg)}`);
  };
  const send = transport.send.bind(transport);
  transport.send = (msg, options) => {
    onSend(msg);
    log('->', msg);
    return send(msg, options);
  };
  let handler;
  const wrapped = (msg, extra) => {
    onReceive(msg);
    log('<-', msg);
    handler?.(msg, extra);
  };
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => (handler ? wrapped : undefined),
    set: (h) => {
      handler = h;
    },
  });
  return transport;
}

// A tapped SDK client transport for the target of parseCommandLine: Streamable HTTP to the URL,
// or stdio to a child process (its stderr passes through).
export function makeTransport(prog, { mode, target }, hooks) {
  if (mode === '--http') return tap(new StreamableHTTPClientTransport(new URL(target[0])), prog, hooks);
  return tap(
    new StdioClientTransport({ command: target[0], args: target.slice(1), env: { ...process.env }, stderr: 'inherit' }),
    prog,
    hooks,
  );
}
