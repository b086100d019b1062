#!/usr/bin/env node
// Interop server peer: the official TypeScript SDK `McpServer` (pinned in package.json) over
// Streamable HTTP, stateful (one transport + one McpServer per Mcp-Session-Id), on plain
// node:http, bound to 127.0.0.1 only, serving /mcp.
//
//   node ts_server.mjs <port>               (port 0 picks a free port)
//   node ts_server.mjs <port> --everything  (serve @modelcontextprotocol/server-everything's own
//                                            server instead, on 127.0.0.1: its CLI binds every
//                                            interface)
//   node ts_server.mjs <port> [--everything] --strict
//                                           (a server that honours the negotiated version: in a
//                                            session negotiated before 2025-11-25, a request with
//                                            params.task or a tasks/* request gets -32602 instead
//                                            of reaching the SDK, which would serve it anyway)
//
// Prints `listening <port>` on stdout once ready. Stops on SIGTERM/SIGINT.
// INTEROP_LOG_HEADERS=1 prints each request's method, path and headers to stderr.
//
// Tools:  echo {text} -> text
//         progress {steps?, interval_ms?} -> notifications/progress per step (with a token)
//         sample {prompt} -> sampling/createMessage to the client, returns the text it got
//         elicit {message?} -> elicitation/create (form), returns JSON {action, content}
//         log {message, level?} -> notifications/message with data = message
// Resource: interop://greeting (text/plain).  Prompt: greet {name}.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  isInitializeRequest,
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

const HOST = '127.0.0.1';
const portArg = process.argv[2];
const flags = process.argv.slice(3);
if (
  portArg === undefined ||
  !/^\d+$/.test(portArg) ||
  Number(portArg) > 65535 ||
  flags.some((f) => f !== '--everything' && f !== '--strict')
) {
  console.error('usage: node ts_server.mjs <port> [--everything] [--strict]');
  process.exit(2);
}
const EVERYTHING = flags.includes('--everything');
const STRICT = flags.includes('--strict');
const LOG_HEADERS = process.env.INTEROP_LOG_HEADERS === '1';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const ELICIT_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'a name' },
    count: { type: 'integer', minimum: 1, maximum: 10, description: 'a small integer' },
    agree: { type: 'boolean', description: 'a flag' },
  },
  required: ['name', 'count', 'agree'],
};

function contentMatches(content) {
  return (
    content &&
    typeof content.name === 'string' &&
    Number.isInteger(content.count) &&
    content.count >= 1 &&
    content.count <= 10 &&
    typeof content.agree === 'boolean'
  );
}

function buildServer() {
  const mcp = new McpServer(
    { name: 'taskgate-interop-ts-server', version: '1.0.0' },
    { capabilities: { logging: {} } },
  );

  mcp.registerTool(
    'echo',
    { description: 'Returns its text argument unchanged', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );

  mcp.registerTool(
    'progress',
    {
      description: 'Sends one notifications/progress per step when the request has a progress token',
      inputSchema: { steps: z.number().int().min(1).max(100).optional(), interval_ms: z.number().int().min(0).max(5000).optional() },
    },
    async ({ steps = 3, interval_ms = 50 }, extra) => {
      const token = extra._meta?.progressToken;
      let sent = 0;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress: i, total: steps, message: `step ${i} of ${steps}` },
          });
          sent += 1;
        }
        // Pause after every step, the last included, so no notification travels glued
        // to the result (the TS client drops progress that it handles after the result).
        await sleep(interval_ms);
      }
      return { content: [{ type: 'text', text: token === undefined ? 'no progress token' : `sent ${sent} progress notifications` }] };
    },
  );

  mcp.registerTool(
    'sample',
    { description: 'Asks the client for sampling/createMessage and returns the text it answered', inputSchema: { prompt: z.string() } },
    async ({ prompt }, extra) => {
      const res = await extra.sendRequest(
        {
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 50 },
        },
        CreateMessageResultSchema,
      );
      const blocks = Array.isArray(res.content) ? res.content : [res.content];
      const text = blocks.find((b) => b?.type === 'text')?.text;
      if (text === undefined) return { isError: true, content: [{ type: 'text', text: `no text in sampling result: ${JSON.stringify(res)}` }] };
      return { content: [{ type: 'text', text }] };
    },
  );

  mcp.registerTool(
    'elicit',
    { description: 'Asks the client for elicitation/create (form) and returns {action, content} as JSON text', inputSchema: { message: z.string().optional() } },
    async ({ message = 'Please fill in the form' }, extra) => {
      const res = await extra.sendRequest(
        { method: 'elicitation/create', params: { message, requestedSchema: ELICIT_SCHEMA } },
        ElicitResultSchema,
      );
      if (res.action === 'accept' && !contentMatches(res.content)) {
        return { isError: true, content: [{ type: 'text', text: `content does not match the requested schema: ${JSON.stringify(res.content)}` }] };
      }
      return { content: [{ type: 'text', text: JSON.stringify({ action: res.action, content: res.content ?? null }) }] };
    },
  );

  mcp.registerTool(
    'log',
    {
      description: 'Sends notifications/message with data = message (honours logging/setLevel)',
      inputSchema: {
        message: z.string(),
        level: z.enum(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']).optional(),
      },
    },
    async ({ message, level = 'info' }, extra) => {
      const ignored = typeof mcp.server.isMessageIgnored === 'function' && mcp.server.isMessageIgnored(level, extra.sessionId);
      if (!ignored) {
        // Sent on the request's own stream, before the result.
        await extra.sendNotification({ method: 'notifications/message', params: { level, logger: 'ts_server', data: message } });
      }
      return { content: [{ type: 'text', text: ignored ? `not sent: level ${level} is below the session's level` : `logged at ${level}` }] };
    },
  );

  mcp.registerResource(
    'greeting',
    'interop://greeting',
    { description: 'A fixed greeting', mimeType: 'text/plain' },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'hello from ts_server' }] }),
  );

  mcp.registerPrompt(
    'greet',
    { description: 'Greets someone', argsSchema: { name: z.string() } },
    ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Please greet ${name}.` } }] }),
  );

  return mcp;
}

// ---------------------------------------------------------------------------
// HTTP plumbing

// The first request in `body` (one message or a batch) that a session of `version` has no
// place for: task fields exist from 2025-11-25 on. (Dates order as strings.)
function taskFieldsBeyond(version, body) {
  if (version >= '2025-11-25') return undefined;
  const msgs = Array.isArray(body) ? body : [body];
  return msgs.find((m) => m && m.id !== undefined && typeof m.method === 'string' && (m.method.startsWith('tasks/') || m.params?.task !== undefined));
}

// One McpServer (and its cleanup) per session.
let createSessionServer = () => ({ server: buildServer(), cleanup: () => {} });
if (EVERYTHING) {
  const mod = await import('@modelcontextprotocol/server-everything/dist/server/index.js');
  createSessionServer = () => mod.createServer();
}

const sessions = new Map(); // session id -> { transport, mcp }

function sendJsonError(res, status, code, message) {
  if (res.headersSent) return res.end();
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const url = new URL(req.url, `http://${HOST}`);
  if (LOG_HEADERS) console.error(`ts_server: ${req.method} ${req.url} ${JSON.stringify(req.headers)}`);
  if (url.pathname !== '/mcp') return sendJsonError(res, 404, -32601, 'Not found: only /mcp is served');

  const sid = req.headers['mcp-session-id'];
  let body;
  if (req.method === 'POST') {
    const raw = await readBody(req);
    try {
      body = JSON.parse(raw);
    } catch {
      return sendJsonError(res, 400, -32700, 'Parse error');
    }
  }

  if (sid !== undefined) {
    const s = sessions.get(sid);
    if (!s) return sendJsonError(res, 404, -32001, 'Session not found');
    const refused = STRICT && body !== undefined && taskFieldsBeyond(s.version, body);
    if (refused) {
      console.error(`ts_server: strict: refused ${refused.method} in a ${s.version} session`);
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ jsonrpc: '2.0', id: refused.id, error: { code: -32602, message: `strict: ${refused.method} with task fields is not in protocol ${s.version}` } }));
    }
    return s.transport.handleRequest(req, res, body);
  }

  const isInit = req.method === 'POST' && (Array.isArray(body) ? body.some(isInitializeRequest) : isInitializeRequest(body));
  if (!isInit) return sendJsonError(res, 400, -32000, 'Bad Request: no valid session ID provided');

  const { server: mcp, cleanup } = createSessionServer();
  // The version the SDK answers with: the one asked for if it supports it, else its newest.
  const init = Array.isArray(body) ? body.find(isInitializeRequest) : body;
  const asked = init?.params?.protocolVersion;
  const version = SUPPORTED_PROTOCOL_VERSIONS.includes(asked) ? asked : LATEST_PROTOCOL_VERSION;
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => {
      sessions.set(id, { transport, mcp, cleanup, version });
    },
  });
  transport.onclose = () => {
    const id = transport.sessionId;
    if (id && sessions.has(id)) {
      sessions.delete(id);
      cleanup(id);
    }
  };
  await mcp.connect(transport);
  return transport.handleRequest(req, res, body);
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.error(`ts_server: error handling ${req.method} ${req.url}: ${e?.stack || e}`);
    sendJsonError(res, 500, -32603, 'Internal error');
  });
});

server.on('error', (e) => {
  console.error(`ts_server: ${e.message}`);
  process.exit(1);
});

server.listen(Number(portArg), HOST, () => {
  console.log(`listening ${server.address().port}`);
});

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  setTimeout(() => process.exit(0), 2000).unref();
  server.close();
  server.closeAllConnections();
  await Promise.allSettled([...sessions.values()].map(({ mcp }) => mcp.close()));
  for (const [id, { cleanup }] of sessions) cleanup(id);
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
