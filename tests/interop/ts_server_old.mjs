// A server of an older generation: the TypeScript SDK release whose newest protocol version is
// the one named on the command line (npm alias sdk-<version>, see README.md), over stdio, on the
// SDK's low-level Server (JSON Schema tools, no zod). It has no tasks: its versions predate them.
//
//   node ts_server_old.mjs <2024-11-05 | 2025-03-26 | 2025-06-18>
//
// Tools, as py_server.py's: echo {text}; slow {seconds, steps} (progress after each step,
// returns "slow done after N steps", stops when cancelled); stats (JSON counters
// slow_started / slow_finished / slow_cancelled, and `protocolVersion`: the version the
// SDK says it speaks at most). Logs to stderr only.

const VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18'];
const version = process.argv[2];
if (!VERSIONS.includes(version)) {
  console.error(`usage: node ts_server_old.mjs <${VERSIONS.join(' | ')}>`);
  process.exit(2);
}
const sdk = `sdk-${version}`;
const { Server } = await import(`${sdk}/server/index.js`);
const { StdioServerTransport } = await import(`${sdk}/server/stdio.js`);
const types = await import(`${sdk}/types.js`);
if (types.LATEST_PROTOCOL_VERSION !== version) {
  console.error(`ts_server_old: ${sdk} speaks ${types.LATEST_PROTOCOL_VERSION} at most, not ${version}`);
  process.exit(1);
}

const stats = { slow_started: 0, slow_finished: 0, slow_cancelled: 0, protocolVersion: version };
const server = new Server({ name: `taskgate-interop-ts-server-${version}`, version: '1.0.0' }, { capabilities: { tools: {} } });

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(new Error('cancelled'));
    });
  });

server.setRequestHandler(types.ListToolsRequestSchema, async () => ({
  tools: [
    { name: 'echo', description: 'Returns its text argument unchanged', inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } },
    {
      name: 'slow',
      description: 'Takes `seconds` in `steps` steps, reporting progress after each step',
      inputSchema: { type: 'object', properties: { seconds: { type: 'number' }, steps: { type: 'integer' } } },
    },
    { name: 'stats', description: 'Counters of slow calls in this process, as JSON text', inputSchema: { type: 'object' } },
  ],
}));

server.setRequestHandler(types.CallToolRequestSchema, async (req, extra) => {
  const args = req.params.arguments ?? {};
  switch (req.params.name) {
    case 'echo':
      return text(String(args.text ?? ''));
    case 'stats':
      return text(JSON.stringify(stats));
    case 'slow': {
      const steps = Math.max(1, Math.trunc(args.steps ?? 3));
      const seconds = Math.max(0, args.seconds ?? 1);
      const token = req.params._meta?.progressToken;
      stats.slow_started += 1;
      try {
        for (let i = 1; i <= steps; i++) {
          await sleep((seconds * 1000) / steps, extra?.signal);
          if (token !== undefined) {
            const params = { progressToken: token, progress: i, total: steps };
            if (version >= '2025-03-26') params.message = `step ${i} of ${steps}`;
            // 1.0.4 gives a handler only the abort signal: its progress goes out unrelated.
            const note = { method: 'notifications/progress', params };
            await (extra?.sendNotification ? extra.sendNotification(note) : server.notification(note));
          }
        }
      } catch (e) {
        stats.slow_cancelled += 1;
        console.error(`ts_server_old: slow cancelled (started ${stats.slow_started})`);
        throw e;
      }
      stats.slow_finished += 1;
      return text(`slow done after ${steps} steps`);
    }
    default:
      throw new Error(`unknown tool ${req.params.name}`);
  }
});

await server.connect(new StdioServerTransport());
