//! What each config key does, its default where the code's own defaults cannot say it, and
//! its bounds: one entry per key that `schema::keys` finds. A key added to the raw types
//! without an entry here is listed in the reference as "not described yet", and the test
//! `every_config_key_is_described` (tests/docs.rs) fails until it has one.

/// One key of the reference.
pub struct KeyDoc {
    /// Dotted from the top, as `schema::keys` names it (`upstream.tasks.ttl`).
    pub key: &'static str,
    /// The default in words, where the effective settings of a minimal config (what
    /// `taskgate check` prints) do not show it; `None`: take it from them.
    pub default: Option<&'static str>,
    /// What values are accepted (beyond the key's type).
    pub bounds: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

const fn k(key: &'static str, bounds: &'static str, meaning: &'static str) -> KeyDoc {
    KeyDoc { key, default: None, bounds, meaning }
}

const fn d(key: &'static str, default: &'static str, bounds: &'static str, meaning: &'static str) -> KeyDoc {
    KeyDoc { key, default: Some(default), bounds, meaning }
}

/// A positive duration: what every duration key takes unless its bounds say otherwise.
const DURATION: &str = "a positive duration, at most a year (`\"8760h\"`)";
const DAY: &str = "a positive duration, at most `\"24h\"`";
const POSITIVE: &str = "at least 1";

pub const KEYS: &[KeyDoc] = &[
    // [server]
    k("server.listen", "an address with a port", "address and port to listen on (`--listen` overrides)"),
    k(
        "server.allowed_origins",
        "origins; `:*` allows any port, `\"*\"` any origin",
        "a request whose `Origin` header is present and matches none of these gets 403",
    ),
    k(
        "server.allowed_hosts",
        "not empty; `[\"*\"]` accepts any",
        "`Host` header names (port ignored) accepted, against DNS rebinding",
    ),
    k(
        "server.max_body_bytes",
        POSITIVE,
        "largest request body (HTTP 413 above it), and the longest line `taskgate stdio` reads from its client; also the largest message read from an upstream (a stdio line, an SSE event, a JSON body): a larger response fails its request at once with JSON-RPC -32000 \"response exceeds max_body_bytes\"",
    ),
    k(
        "server.max_sessions",
        POSITIVE,
        "concurrent downstream HTTP sessions, Streamable HTTP and legacy HTTP+SSE together (HTTP 503 above it)",
    ),
    d(
        "server.max_sessions_per_client",
        "with `[server.auth]`, half of `max_sessions`, rounded up; without, `max_sessions`",
        "1 to `max_sessions`",
        "sessions one client may hold open, both HTTP transports together; its next `initialize` (or legacy SSE stream) gets HTTP 429 naming this key, and other clients are unaffected. A client is a principal with `[server.auth]`, else a remote address (an IPv6 address by its /64): every client on one machine, or behind one proxy, is one client without authentication, which is why the cap is then all of `max_sessions` unless set",
    ),
    d(
        "server.max_links_per_client",
        "with `[server.auth]`, half of `max_links`, rounded up; without, `max_links`",
        "1 to `max_links`",
        "upstream links one client's sessions may hold open, including those of its ended sessions that hosted tasks still run on; a session of that client that needs another gets JSON-RPC -32004 naming this key. A shared link counts for nobody's share. A client is as for `max_sessions_per_client`",
    ),
    d(
        "server.max_listens_per_client",
        "with `[server.auth]`, half of `max_connections`, rounded up; without, `max_connections`",
        "1 to `max_connections`",
        "`subscriptions/listen` streams one 2026-07-28 client may hold open at once (each holds a connection, and its file descriptor, for as long as the client wants); its next gets HTTP 429 with -32603 (`data.originalCode` -32004) naming this key. A client is as for `max_sessions_per_client`",
    ),
    d(
        "server.max_links",
        "`max_sessions`",
        POSITIVE,
        "upstream links (stdio children, upstream HTTP sessions) open at once, including those that outlive their session while hosted tasks run; a session that needs one above it gets JSON-RPC -32004. A shared link (`share = true`) counts once, whatever the number of its sessions",
    ),
    k(
        "server.session_idle_timeout",
        DURATION,
        "a session with no request and no open stream for this long is ended and its link closed (a legacy HTTP+SSE session always has its stream open: it ends with it)",
    ),
    k(
        "server.event_buffer",
        POSITIVE,
        "SSE events kept per session for `Last-Event-ID` replay; also the bound on messages waiting for a GET stream, and on those waiting to be sent on a legacy HTTP+SSE stream (all are bounded in bytes too: `event_buffer_bytes`)",
    ),
    k(
        "server.max_in_flight",
        POSITIVE,
        "requests one link may have in flight upstream (JSON-RPC -32004 above it): one session's, or on a shared link all its sessions' together; also the server requests waiting for one client, the resource subscriptions one session may hold on a shared link, and on legacy HTTP+SSE the requests a session is owed a response for (HTTP 503 above it); also the bridged calls one session may have (core and extension bridges, and the `tasks/result` of extension tasks it waits in for a 2025-11-25 client), the plain calls kept for a retry declaring the tasks extension, and the input requests relayed per bridged extension task (1024 at most); also the questions held per task relayed to 2026-07-28 clients and per upstream for all of them, and the task ids one `subscriptions/listen` may name",
    ),
    k("server.sse_keepalive", DURATION, "interval of SSE comment keep-alives on open streams"),
    k(
        "server.json_response_window",
        DURATION,
        "how long a POST waits for its response before switching to an event stream",
    ),
    k(
        "server.progress_min_interval",
        "a duration, `\"0ms\"` allowed, at most a year",
        "once a token's burst allowance (`progress_burst`) is spent, its progress is forwarded at most this often, and what comes faster is coalesced to the latest value, which always gets through before the result (`\"0ms\"` turns coalescing off)",
    ),
    k(
        "server.progress_burst",
        "an integer, 1 to 10000",
        "progress notifications for one token forwarded at once however close together, before `progress_min_interval` paces them; the allowance grows back by one per interval, so a server that reports a few steps back to back reaches the client as it would direct",
    ),
    k(
        "server.drain_timeout",
        DAY,
        "on SIGTERM or Ctrl-C the gateway stops accepting connections and gives the requests in flight this long to finish (a request arriving on an open connection meanwhile gets 503); the rest are answered with JSON-RPC -32000 \"the gateway is shutting down\", then every session ends (stdio children: stdin closed, SIGTERM, SIGKILL; HTTP upstream sessions: DELETE), the task store is committed and the process exits 0. See [Shutdown and draining](operating.md#shutdown-and-draining)",
    ),
    k(
        "server.header_read_timeout",
        DAY,
        "time to receive a request's headers, counted from when the connection is ready for the next request: a client that trickles its headers is disconnected, and so is a keep-alive connection idle this long (an open event stream is not idle)",
    ),
    k(
        "server.body_read_timeout",
        DAY,
        "time to receive a request body once its headers are in; a body that does not arrive in time gets HTTP 408 and the connection is closed",
    ),
    k(
        "server.max_connections",
        "1 to 16777216",
        "downstream TCP connections open at once; past it a new connection is closed at once (the client sees the connection end and may retry), so the ones already served keep their share",
    ),
    k(
        "server.event_buffer_bytes",
        POSITIVE,
        "bytes of SSE events kept per session for replay, beside the count `event_buffer`; a full buffer evicts its oldest events, and a `Last-Event-ID` older than what is kept gets a fresh stream. Also bounds the bytes of messages waiting for a GET stream or on a legacy HTTP+SSE stream",
    ),
    k(
        "server.max_batch",
        POSITIVE,
        "requests in one JSON-RPC batch (2025-03-26 sessions only); a longer batch is refused whole with JSON-RPC -32600 (HTTP 400). Also the most messages in a batch from an upstream: a longer one is dropped, failing the requests it answered",
    ),
    k(
        "server.max_body_values",
        POSITIVE,
        "JSON values (objects, arrays, strings, numbers, `true`, `false`, `null`) one request body (or stdio line) of a client may hold; a body with more is refused before it is parsed, with JSON-RPC -32600 (HTTP 400; under its id where a scan finds one), and nothing else changes. Parsed, each value costs tens of bytes: this bounds what a body of tiny values (`[{},{},…]`) can make the gateway hold, as `max_body_bytes` bounds its bytes. A body of at most this many bytes is not counted (it cannot hold more)",
    ),
    k(
        "server.max_initialize_bytes",
        POSITIVE,
        "the largest `initialize` request a legacy client may send, in bytes: its params (capabilities, client info) are what a session keeps while it lives and what the task store keeps to revive it after a restart. A larger one is refused with JSON-RPC -32602 naming the key, and nothing is kept: over HTTP no session is made (the client may initialize again), and a stdio session stays uninitialized",
    ),
    k(
        "server.cors_origins",
        "at most 64 entries, each `scheme://host[:port]` (no trailing `/`) or `\"*\"`",
        "origins a browser page may call the gateway from: CORS preflights are answered and `Access-Control-Allow-Origin` is added for them; empty: no CORS at all. See [CORS](operating.md#cors)",
    ),
    d(
        "server.watch_config",
        "`false`",
        "`true` or `false`",
        "reload the config when its file changes (looked at every second; written in place or replaced by a rename), as on SIGHUP. See [Reloading the config](operating.md#reloading-the-config)",
    ),
    // [server.auth]
    d(
        "server.auth.mode",
        "`\"none\"`",
        "`\"none\"`, `\"bearer\"` or `\"jwt\"`",
        "who may use the HTTP fronts, and whose tasks are whose. See [Authentication](operating.md#authentication-and-tasks-bound-to-identity)",
    ),
    d(
        "server.auth.resource",
        "the request's scheme and `Host` (`https` with TLS)",
        "an `http://` or `https://` URL",
        "the gateway's public URL: the protected resource its metadata names, and where that metadata is found",
    ),
    d("server.auth.authorization_servers", "`[]`", "", "authorization servers the Protected Resource Metadata names"),
    d(
        "server.auth.scopes",
        "`[]`",
        "",
        "scopes the metadata names as supported; with `mode = \"jwt\"` a token must grant each of them (in `scope`, space-separated, or `scp`); bearer mode only advertises them",
    ),
    d(
        "server.auth.tokens",
        "none",
        "at least one with `mode = \"bearer\"`, only then",
        "the static bearer tokens, one `[[server.auth.tokens]]` each",
    ),
    d(
        "server.auth.jwks_url",
        "none",
        "`https://` (plain `http://` only on the loopback); with `mode = \"jwt\"`, this or `key_file`",
        "the JWKS the JWTs are verified against: fetched when the first token needs it, again every `jwks_refresh`, and on an unknown key id",
    ),
    d(
        "server.auth.key_file",
        "none",
        "a PEM public key, relative to the config file; with `mode = \"jwt\"`, this or `jwks_url`",
        "the key the JWTs are verified against",
    ),
    d("server.auth.issuer", "none", "required with `mode = \"jwt\"`", "the `iss` every token must carry"),
    d(
        "server.auth.audience",
        "none",
        "required with `mode = \"jwt\"`",
        "a value the token's `aud` must contain (a token issued for this gateway)",
    ),
    d(
        "server.auth.principal_claim",
        "`\"sub\"`",
        "the claim must be a non-empty string",
        "the claim that names a JWT's principal",
    ),
    d("server.auth.leeway", "`\"30s\"`", "at most `\"10m\"`", "clock skew allowed on `exp` and `nbf`"),
    d(
        "server.auth.jwks_refresh",
        "`\"5m\"`",
        "at least `\"1s\"`",
        "how often the JWKS is fetched again (on an unknown key id at most every tenth of it, and never more often than every 10 s)",
    ),
    d("server.auth.tokens.principal", "none", "required, non-empty", "the principal the token stands for"),
    d(
        "server.auth.tokens.env",
        "none",
        "this or `file`; the variable must be set",
        "the environment variable holding the token, read at start (at least 16 printable characters, no two principals sharing one)",
    ),
    d(
        "server.auth.tokens.file",
        "none",
        "this or `env`; relative to the config file",
        "a file holding the token (trimmed)",
    ),
    // [server.tls]
    d(
        "server.tls.cert",
        "none",
        "required in `[server.tls]`; relative to the config file",
        "PEM file of the listener's certificate chain, leaf first; with `[server.tls]`, HTTPS only. See [TLS](operating.md#tls)",
    ),
    d("server.tls.key", "none", "required in `[server.tls]`; PKCS#8, PKCS#1 or SEC1", "PEM file of its private key"),
    // [server.otlp]
    d(
        "server.otlp.endpoint",
        "none",
        "required in `[server.otlp]`; `http://` or `https://`",
        "an OTLP/HTTP collector's base URL: spans are posted to `/v1/traces` under it. See [Tracing](operating.md#tracing)",
    ),
    d("server.otlp.service_name", "`\"taskgate\"`", "not empty", "the `service.name` spans carry"),
    // [server.task_page]
    k(
        "server.task_page.enabled",
        "",
        "the live task page at `/tasks`: served or not (404). See [Task page](operating.md#task-page)",
    ),
    k("server.task_page.operators", "at most 256 principals", "the principals who see and cancel every task"),
    k(
        "server.task_page.refresh",
        "`\"50ms\"` to `\"60s\"`",
        "how often a viewer's snapshot is taken again (sent only when it changed)",
    ),
    k("server.task_page.max_viewers", "1 to 4096", "the event streams open at once (503 past it)"),
    k(
        "server.task_page.max_viewers_per_principal",
        "1 to 4096",
        "of those, the most one authenticated principal may hold (503 past it)",
    ),
    // [tasks]
    k(
        "tasks.max_tasks",
        POSITIVE,
        "tasks kept at once, running and finished (finished ones until their ttl); a full store refuses new task-augmented calls with JSON-RPC -32603 \"task store is full\". Also the most upstream task ids relayed to 2026-07-28 clients, and, with authentication, the most 2026-07-28 upstream tasks whose principal is remembered (least recently used forgotten first: see [Authentication](operating.md#authentication-and-tasks-bound-to-identity))",
    ),
    k("tasks.list_page_size", POSITIVE, "tasks per `tasks/list` page"),
    k(
        "tasks.max_result_bytes",
        POSITIVE,
        "the largest result (or error) one task keeps; a larger one fails the task with -32603",
    ),
    k(
        "tasks.max_store_bytes",
        POSITIVE,
        "the task records kept together, whole: ids, owner, upstream, tool name, status message and the stored result, plus 256 bytes a record; a result that does not fit fails its task, and a new task that would not fit is refused (-32603, \"task store is full\"). With the `file` store the session records (what revives an HTTP session after a restart) count too, each its JSON plus 256 bytes: one that does not fit is not written, and that session would not be revived. The states `progress/get` keeps have a budget of the same size of their own, counted the same way (token, message, error and kept result; a state at most `max_result_bytes`). See [Data and retention](operating.md#data-and-retention)",
    ),
    k(
        "tasks.max_followed",
        "0 or more",
        "extension tasks of 2025-11-25 clients followed in the background at once, all sessions together, for their status notifications (see [Tasks across eras](tasks.md#tasks-across-eras)); `0`: none, and such a client hears of status changes only while its `tasks/result` waits",
    ),
    k(
        "tasks.max_held_input_bytes",
        POSITIVE,
        "the questions upstreams asked during tasks that wait for a client to read them (elicitation, sampling, roots: held for a client without the capability yet, a session gone, a `tasks/result` not yet called), all tasks together, in bytes of their JSON; past it an upstream's next question is refused with JSON-RPC -32603 naming this key, and its task goes on as the upstream decides",
    ),
    d(
        "tasks.store",
        "`\"file\"` for a config read from a file (`taskgate serve --config`), `\"memory\"` for one parsed from text (tests, `Config::parse`), for `taskgate demo-server`, and for `taskgate stdio` unless `store` or `path` is set",
        "`\"memory\"`, `\"file\"` or `\"redis\"`",
        "where tasks are kept: `\"memory\"`, in the process only; `\"file\"`, in a database in `path` that survives a restart (see [Data and retention](operating.md#data-and-retention)); `\"redis\"`, in Redis or Valkey at `redis_url`, shared by several gateways (see [Running several gateways](operating.md#running-several-gateways))",
    ),
    d(
        "tasks.path",
        "`\"taskgate-data\"`, beside the config file",
        "not empty; only with `store = \"file\"` (or without `store`, which then means `\"file\"`)",
        "the `file` store's data directory (relative: to the config file's directory); created if missing, and locked while a gateway has it open: a second gateway on it fails to start",
    ),
    k(
        "tasks.sync_interval",
        "`\"0ms\"` to `\"1s\"`",
        "the `file` store makes at most one durable commit (one fsync) per this long, carrying everything queued meanwhile: a task's end is answered once its commit is on disk (waiting at most this long), a new task is on disk within it (see [Data and retention](operating.md#data-and-retention)); `\"0ms\"`: every change is committed and waited for at once, a new task's too",
    ),
    k(
        "tasks.durability",
        "`\"end\"` or `\"interval\"`; only with the `file` store",
        "when a task's end is acknowledged: `\"end\"`, once it is on disk (a crash loses no end a client was told of); `\"interval\"`, at once, on disk within `sync_interval` as a new task is (a crash in that window may lose ends already answered: their tasks come back `failed`), for one fsync per interval instead of one per end when tasks come one at a time",
    ),
    d(
        "tasks.redis_url",
        "none (required with `store = \"redis\"`)",
        "`redis://[user:password@]host:port[/db]`; only with `store = \"redis\"`",
        "one Redis or Valkey server (not a cluster; no TLS is built in). `${VAR}` is read from the environment, and the URL is printed redacted. The gateway fails to start if the server does not answer within 3 s",
    ),
    d(
        "tasks.redis_prefix",
        "`\"taskgate:\"`",
        "not empty; only with `store = \"redis\"`",
        "the start of every key and channel name the `redis` store uses, so that several deployments can share one server; the gateways of one deployment must use the same one",
    ),
    // [[upstream]]
    d(
        "upstream.name",
        "none (required)",
        "letters, digits, `-`, `_`; unique",
        "served at `/mcp/<name>` (and over legacy HTTP+SSE at `/sse/<name>`)",
    ),
    d(
        "upstream.command",
        "none",
        "exactly one of `command`, `url`, `builtin`",
        "a stdio server: the child is started once per client session (once in all with `share = true`); its stderr goes to the gateway's log, labelled with the upstream's name",
    ),
    d("upstream.args", "`[]`", "only with `command`", "the stdio child's arguments (`${VAR}` expanded)"),
    d("upstream.env", "none", "only with `command`", "environment variables for the stdio child (`${VAR}` expanded)"),
    d("upstream.cwd", "the gateway's", "only with `command`", "the stdio child's working directory"),
    d("upstream.url", "none", "`http://` or `https://`; exactly one of `command`, `url`, `builtin`", "an HTTP server"),
    d(
        "upstream.headers",
        "none",
        "only with `url`; valid header names and values",
        "extra request headers (e.g. `Authorization`), sent with every request (for the legacy transport: the GET and every POST)",
    ),
    d(
        "upstream.transport",
        "`\"auto\"`",
        "only with `url`; `\"auto\"`, `\"streamable-http\"` or `\"sse\"`",
        "`\"auto\"`: Streamable HTTP, falling back to legacy HTTP+SSE at the same URL when the first POST gets 400, 404 or 405 (see [Which HTTP transport](transports.md#which-http-transport-an-upstream-speaks)); `\"streamable-http\"`: Streamable HTTP only; `\"sse\"`: the legacy HTTP+SSE transport of 2024-11-05, `url` being the SSE endpoint (`http://host/sse`)",
    ),
    d(
        "upstream.builtin",
        "none",
        "`\"demo\"`; exactly one of `command`, `url`, `builtin`",
        "`\"demo\"`: the built-in demo server, in-process (over an in-memory duplex, as a stdio server)",
    ),
    k(
        "upstream.connect_timeout",
        DURATION,
        "time to connect to the upstream and complete the gateway's handshake with it (under `era = \"auto\"` the `server/discover` probe gets at most half of it); for the legacy HTTP+SSE transport also the longest wait for the `endpoint` event and for each POST's answer, and under `\"auto\"` for the first POST's response head",
    ),
    k(
        "upstream.request_timeout",
        DURATION,
        "a forwarded request fails (-32001) when neither its result nor progress came for this long (not a `subscriptions/listen` a 2026-07-28 upstream serves: that stream lasts as long as its client keeps it)",
    ),
    k(
        "upstream.max_request_time",
        DURATION,
        "a forwarded request fails (-32001) after this long in all (not a `subscriptions/listen`, as for `request_timeout`)",
    ),
    k(
        "upstream.share",
        "",
        "`false`: a link (stdio child, upstream HTTP session) per client session. `true`: one link serves every session of this upstream (see [Shared links](transports.md#shared-links)); recommended for stateless servers, most HTTP ones",
    ),
    k(
        "upstream.authorization",
        "`\"replace\"` or `\"pass\"`; `\"pass\"` only with `url`, `share = false` and no `Authorization` among the `headers`",
        "`\"replace\"`: the upstream gets the configured `headers` and never the client's `Authorization`. `\"pass\"`: each request upstream carries the `Authorization` of the client's latest request (none if it sent none). See \"Upstream credentials\" under [Authentication](operating.md#authentication-and-tasks-bound-to-identity)",
    ),
    k(
        "upstream.era",
        "`\"auto\"`, `\"legacy\"` or `\"modern\"`",
        "`\"auto\"`: probe with `server/discover`, fall back to `initialize` (see [Modern upstreams](versions.md#modern-upstreams-2026-07-28)); `\"legacy\"`: `initialize` only, no probe; `\"modern\"`: 2026-07-28 only, no `initialize`",
    ),
    k(
        "upstream.max_input_rounds",
        "1 to 1024",
        "a 2026-07-28 upstream may answer one request (a blocking call, or a hosted task's call) with `input_required` this many times; one more fails the request with JSON-RPC -32603 naming the key",
    ),
    k(
        "upstream.max_input_requests",
        "1 to 1024",
        "input requests one such answer may carry; a round with more fails its request with -32603 naming the key",
    ),
    // [upstream.client_info]
    d(
        "upstream.client_info.name",
        "`\"taskgate\"`",
        "not empty",
        "the `clientInfo.name` the gateway sends in its own `initialize` to this upstream",
    ),
    d("upstream.client_info.version", "taskgate's version", "not empty", "its `clientInfo.version`"),
    d("upstream.client_info.title", "none", "not empty", "its `clientInfo.title`, if set"),
    // [upstream.tasks]
    k(
        "upstream.tasks.hosted",
        "`\"auto\"`, `\"always\"` or `\"never\"`",
        "`\"auto\"`: host tasks for an upstream that does not declare `tasks` (except the tools its listing marks `required`), and for tools a task-capable upstream marks `forbidden` or leaves unmarked; `\"always\"`: host even where the upstream could run the task (not for tools it marks `required`); `\"never\"`: task requests pass through",
    ),
    k(
        "upstream.tasks.required",
        "`\"bridge\"` or `\"hide\"`",
        "for tools the upstream marks `required`: `\"bridge\"` (old clients see the tool without `execution` and call it plainly; 2025-11-25 clients see it `optional`) or `\"hide\"` (old clients do not see it, a call gets -32601; 2025-11-25 clients see it unchanged)",
    ),
    k("upstream.tasks.hosted_tools", "glob patterns (`*`, `?`)", "the tools offered as hosted tasks"),
    k(
        "upstream.tasks.ttl",
        "a positive duration, between `min_ttl` and `max_ttl`",
        "task retention when the client asks for none; also the ttl of bridged upstream tasks",
    ),
    k(
        "upstream.tasks.max_ttl",
        DURATION,
        "the longest retention granted; the ttl actually applied is what the client is told",
    ),
    d(
        "upstream.tasks.min_ttl",
        "`\"1s\"` (or `ttl`, if shorter)",
        "a positive duration, at most `ttl`",
        "the shortest retention granted (`ttl: 0` gets this)",
    ),
    k("upstream.tasks.poll_interval", DURATION, "the `pollInterval` suggested to clients"),
    k(
        "upstream.tasks.plain_within",
        "a duration, `\"0ms\"` allowed, at most a year",
        "how long a hosted call of a 2026-07-28 client that declared the tasks extension may run and still be answered as the extension's servers decide: plainly if it ends within it, with an input round (`InputRequiredResult`, the task's questions, a `requestState` naming it) if it asks first, as a task only past it; `\"0ms\"` makes every hosted call a task at once",
    ),
    k(
        "upstream.tasks.task_tools",
        "glob patterns (`*`, `?`)",
        "the hosted tools whose calls are a task at once for a 2026-07-28 client, whatever `plain_within` says: tools that always run as a task, as a server of the extension may decide per tool (none by default)",
    ),
    k(
        "upstream.tasks.max_tasks_per_owner",
        POSITIVE,
        "tasks one client may hold, running and finished (until their ttl); above it a new one is refused with -32004. Without authentication a client is its remote address over HTTP, and the process's one client over stdio; with it, its principal. In front of an extension-task upstream it also bounds the extension tasks one session keeps for a 2025-11-25 client, and, with authentication, the tasks of a 2026-07-28 upstream whose principal is remembered per principal (its least recently used forgotten first: see [Authentication](operating.md#authentication-and-tasks-bound-to-identity))",
    ),
    // [upstream.dialects]
    k(
        "upstream.dialects.progress_get",
        "",
        "the progress-state proposal: `progress/get`, and `_meta.progress` on the results of requests with a progress token. See [Progress and operations by token](tasks.md#progress-and-operations-by-token)",
    ),
    k(
        "upstream.dialects.sep1391",
        "",
        "SEP-1391 operations, for clients that declare `capabilities.experimental[\"sep-1391\"]`",
    ),
    k("upstream.dialects.retention", DAY, "how long an ended request's state stays readable by `progress/get`"),
    // Added with the bounds on peers' records, the per-client share and era detection.
    k(
        "tasks.store_outage_wait",
        "`\"0ms\"` to `\"10m\"`",
        "how long a `tasks/result` waits for a task's end that the store did not take at first, before answering -32603 naming the store; the end itself is kept and written again until the store takes it",
    ),
    k(
        "server.task_page.max_snapshot_bytes",
        "4096 to 256 MiB",
        "the most bytes of rows in one task-page snapshot; rows past it are left out and the snapshot says `truncated`",
    ),
    k(
        "server.task_page.unread_timeout",
        "`\"100ms\"` to `\"1h\"`",
        "a viewer whose stream takes nothing for this long while a snapshot waits for it is dropped and its place given back",
    ),
    k(
        "tasks.max_tool_name_bytes",
        "16 to 65536",
        "a task-augmented `tools/call` naming a longer tool gets -32602 and no task is made",
    ),
    k(
        "tasks.max_task_id_bytes",
        "64 to 65536",
        "the longest task id of an upstream's the gateway keeps: the 2026-07-28 extension tasks it follows for 2025-11-25 clients, the tasks it binds to an authenticated principal, and a 2025-11-25 upstream's tasks it passes to a session. A task created with a longer id is not kept: it is cancelled upstream, and the client's call gets -32603 naming this key. Also the longest progress token `progress/get` follows",
    ),
    k(
        "tasks.max_status_message_bytes",
        "64 to 1 MiB",
        "longer status, error and progress messages from an upstream are cut, ending with `… [cut by the gateway]`",
    ),
    k(
        "tasks.max_list_page_bytes",
        "4096 to 256 MiB",
        "a `tasks/list` page ends early, with a `nextCursor`, once its tasks reach this size (it always carries one task)",
    ),
    d(
        "upstream.max_in_flight_per_client",
        "half of `server.max_in_flight`, rounded up",
        "1 to `server.max_in_flight`",
        "how many requests one client may hold in flight on a shared link (`share = true`, and every 2026-07-28 request); past it -32004. A client is a principal; without authentication, a session, or for 2026-07-28 requests over HTTP (which have none) the client's address. The background calls of the client's hosted tasks count too, as its direct calls do",
    ),
    d(
        "upstream.probe_timeout",
        "`\"2s\"`, or half of `connect_timeout` if shorter",
        "positive, at most half of `connect_timeout`",
        "under `era = \"auto\"`, how long the `server/discover` probe waits before the upstream is initialized as a legacy server",
    ),
    // [server.limits], [upstream.limits]
    d(
        "server.limits.calls_per_minute",
        "absent: no limit",
        "1 to 1000000",
        "the calls (`tools/call`, `prompts/get`, `resources/read`; a task-augmented call is one) one client may make per minute through all upstreams together; a client is its principal with authentication, else its session (a 2026-07-28 client without authentication: its address). A call past it gets -32004 with `data.retryAfterMs`, over HTTP with status 429 and `Retry-After`, and nothing goes upstream. See [Rate limits](operating.md#rate-limits)",
    ),
    d(
        "server.limits.burst",
        "a sixth of `calls_per_minute`, 1 to 100",
        "1 to 1000000",
        "the calls one client may make at once before the rate applies",
    ),
    d(
        "upstream.limits.calls_per_minute",
        "absent: no limit",
        "1 to 1000000",
        "as `server.limits.calls_per_minute`, for the calls to this upstream alone (both apply)",
    ),
    d(
        "upstream.limits.burst",
        "a sixth of `calls_per_minute`, 1 to 100",
        "1 to 1000000",
        "as `server.limits.burst`, for this upstream",
    ),
    // [upstream.tools]
    d(
        "upstream.tools.allow",
        "absent: every tool",
        "glob patterns (`*`, `?`), none empty",
        "the upstream's tools offered to clients; a tool not offered is absent from every `tools/list` page, and a call of it, on any path (plain, task, bridged, hosted, deferred), gets -32602 `unknown tool` with nothing sent upstream. See [Tool policy](operating.md#tool-policy)",
    ),
    k("upstream.tools.deny", "glob patterns (`*`, `?`), none empty", "tools never offered; wins over `allow`"),
    k(
        "upstream.tools.for",
        "",
        "a rule for named principals (with authentication), in place of the upstream's `allow` and `deny`; the first that names a client's principal is its rule",
    ),
    k(
        "upstream.tools.for.principals",
        "at least one name, none empty",
        "the principals this rule is for, as authentication names them",
    ),
    d("upstream.tools.for.allow", "absent: every tool", "glob patterns", "the tools offered to these principals"),
    k(
        "upstream.tools.for.deny",
        "glob patterns",
        "the tools never offered to these principals; wins over this rule's `allow`",
    ),
    // [upstream.long_calls]
    d(
        "upstream.long_calls.defer_after",
        "absent: off",
        "a positive duration, at most `\"10m\"`",
        "a plain `tools/call` of a client without tasks (before 2025-11-25) still running after this is answered with an ordinary tool result naming a hosted task, and goes on upstream as that task; set it below the clients' own timeouts (60 s for many). See [Long calls](tasks.md#long-calls)",
    ),
    k(
        "upstream.long_calls.tools",
        "glob patterns (`*`, `?`)",
        "the tools whose calls may be deferred (of those the gateway hosts, `upstream.tasks.hosted_tools`)",
    ),
    k(
        "upstream.long_calls.wait_max",
        "a positive duration, at most `\"10m\"`",
        "the longest one call of the wait tool blocks before it answers that the task still runs",
    ),
    k(
        "upstream.long_calls.tool_prefix",
        "1 to 120 of `A-Z a-z 0-9 _ - .`",
        "the gateway's tools are this followed by `wait`, `status` and `cancel`; where the upstream lists a tool of the same name, the upstream's is kept and the gateway's is not offered",
    ),
    k(
        "upstream.long_calls.keepalive",
        "a duration, `\"0ms\"` (off) to `\"10m\"`",
        "while a deferrable call's upstream is silent this long, a client that sent a `progressToken` gets a progress notification (rising values, a message), so that clients that reset their timeout on progress keep waiting",
    ),
];
