//! What each table of the config is for: the line under its heading in docs/configuration.md.

/// The tables of the config, each with a line saying what it is for.
pub const TABLES: &[(&str, &str)] = &[
    ("server", "The HTTP fronts: where the gateway listens, who may reach it, and the bounds of every session."),
    (
        "server.auth",
        "Who may use the HTTP fronts, and whose tasks are whose. See [Authentication and tasks bound to identity](operating.md#authentication-and-tasks-bound-to-identity).",
    ),
    ("server.auth.tokens", "One per static bearer token (`mode = \"bearer\"`)."),
    ("server.tls", "With this table, HTTPS only. See [TLS](operating.md#tls)."),
    (
        "server.otlp",
        "Span export over OTLP/HTTP, in a build with the `otlp` feature (`--features otlp`). See [Tracing](operating.md#tracing).",
    ),
    (
        "server.limits",
        "How fast one client may call through all upstreams together. See [Rate limits](operating.md#rate-limits).",
    ),
    ("server.task_page", "The live task page at `/tasks`. See [Task page](operating.md#task-page)."),
    ("tasks", "The gateway-wide task store (hosted tasks), and the extension tasks it follows."),
    (
        "upstream",
        "One per upstream. Each upstream is served at `/mcp/<name>` (and over legacy HTTP+SSE at `/sse/<name>`) and has exactly one transport: `command`, `url` or `builtin`.",
    ),
    (
        "upstream.client_info",
        "Written after the `[[upstream]]` table it belongs to (or inline, `client_info = { name = \"…\" }`).",
    ),
    ("upstream.tasks", "Written after the `[[upstream]]` table it belongs to. See [Tasks](tasks.md)."),
    (
        "upstream.dialects",
        "Written after the `[[upstream]]` table it belongs to; see [Progress and operations by token](tasks.md#progress-and-operations-by-token).",
    ),
    (
        "upstream.limits",
        "Written after the `[[upstream]]` table it belongs to; see [Rate limits](operating.md#rate-limits).",
    ),
    (
        "upstream.tools",
        "Written after the `[[upstream]]` table it belongs to; see [Tool policy](operating.md#tool-policy).",
    ),
    ("upstream.tools.for", "One per rule for named principals (`[[upstream.tools.for]]`)."),
    (
        "upstream.long_calls",
        "Written after the `[[upstream]]` table it belongs to; see [Long calls](tasks.md#long-calls).",
    ),
];
