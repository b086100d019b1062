#!/usr/bin/env bash
# The client the conformance suite's client scenarios judge, with taskgate as the client of the
# suite's mock server: `conformance client --command "client_through_gateway.sh" --scenario S`
# runs this with the mock's URL as the last argument. It starts the gateway (TASKGATE_BIN) on
# 127.0.0.1 with that URL as its one upstream (era detection, defaults), and drives it with
# curl: as a 2026-07-28 client for the era's scenarios (discover, tools/list, a tools/call),
# as a 2025-11-25 client otherwise (initialize, notifications/initialized, tools/list, a
# tools/call). What the mock sees is the gateway's upstream side. The gateway is stopped by
# its pid (SIGTERM, a bounded wait, SIGKILL) whatever happens.
set -uo pipefail

url="${!#}"
bin="${TASKGATE_BIN:?TASKGATE_BIN names the taskgate binary}"
dir="$(mktemp -d)"
gw=""
stop() {
  if [ -n "$gw" ] && kill -0 "$gw" 2>/dev/null; then
    kill -TERM "$gw" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$gw" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$gw" 2>/dev/null
    wait "$gw" 2>/dev/null
  fi
  rm -rf "$dir"
}
trap stop EXIT

cat >"$dir/config.toml" <<EOT
[server]
listen = "127.0.0.1:0"
[tasks]
store = "memory"
[[upstream]]
name = "up"
url = "$url"
EOT
"$bin" serve --config "$dir/config.toml" 2>"$dir/log" &
gw=$!
addr=""
for _ in $(seq 1 100); do
  addr="$(sed -n 's/.*listening on http:\/\/\([0-9.:]*\).*/\1/p' "$dir/log" | head -n1)"
  [ -n "$addr" ] && break
  kill -0 "$gw" 2>/dev/null || break
  sleep 0.1
done
[ -n "$addr" ] || { echo "client_through_gateway: the gateway did not listen" >&2; cat "$dir/log" >&2; exit 1; }

endpoint="http://$addr/mcp/up"
post() {
  curl -sS --max-time 20 -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' "$@"
}

# A 2026-07-28 scenario is met by a 2026-07-28 client of the gateway: stateless requests, each
# with its _meta and mirrored headers.
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  request-metadata | http-standard-headers | http-custom-headers | sep-2322-* | json-schema-ref-no-deref)
    meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{},"sampling":{},"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"conformance-through-taskgate","version":"1"}}'
    modern() { # METHOD NAME PARAMS
      local name=()
      [ -n "$2" ] && name=(-H "mcp-name: $2")
      post -H 'mcp-protocol-version: 2026-07-28' -H "mcp-method: $1" "${name[@]}" -X POST "$endpoint" \
        -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$1\",\"params\":{$3$meta}}" >>"$dir/out"
    }
    modern server/discover "" ""
    modern tools/list "" ""
    modern tools/call conformance_probe '"name":"conformance_probe","arguments":{},'
    exit 0
    ;;
esac

# Anything else is met by a 2025-11-25 client: a session.
sid="$(post -D - -o "$dir/init" -X POST "$endpoint" \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"sampling":{},"elicitation":{}},"clientInfo":{"name":"conformance-through-taskgate","version":"1"}}}' |
  tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" {print $2}')"
[ -n "$sid" ] || { echo "client_through_gateway: initialize failed: $(cat "$dir/init")" >&2; cat "$dir/log" >&2; exit 1; }
session=(-H "mcp-session-id: $sid" -H 'mcp-protocol-version: 2025-11-25')
post "${session[@]}" -X POST "$endpoint" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
post "${session[@]}" -X POST "$endpoint" -d '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}' >"$dir/list"
post "${session[@]}" -X POST "$endpoint" \
  -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"conformance_probe","arguments":{}}}' >"$dir/call"
post "${session[@]}" -X DELETE "$endpoint" >/dev/null
exit 0
