#!/usr/bin/env python3
"""Interop server peer: the official Python SDK `MCPServer` (mcp==2.3.0, see requirements.txt).

It has no tasks: it declares no `capabilities.tasks`, marks no tool with `execution`, and
answers a task-augmented `tools/call` as a plain call (the SDK ignores `params.task`). It is
the "upstream without tasks" that taskgate hosts tasks in front of.

Run it with tests/interop/.venv/bin/python:

    py_server.py                  stdio (the default)
    py_server.py --http <port>    Streamable HTTP on 127.0.0.1:<port>, path /mcp (stateful
                                  sessions); port 0 picks a free port. Prints `listening <port>`
                                  on stdout once it accepts connections. Stops on SIGTERM/SIGINT.
    py_server.py --sse <port>     the legacy HTTP+SSE transport (2024-11-05) on 127.0.0.1:<port>:
                                  GET /sse opens the event stream, whose `endpoint` event names
                                  /messages/?session_id=...; a POST on /sse gets 405. Otherwise
                                  as --http.
    py_server.py --http <port> --modern
                                  2026-07-28 only, over Streamable HTTP: mcp 2.3.0 is dual era
                                  and routes a POST to its stateless 2026-07-28 entry by its
                                  MCP-Protocol-Version header; in front of it, a POST without
                                  a modern version header (an `initialize`, a legacy session's
                                  request) gets HTTP 400 with -32022 naming ["2026-07-28"],
                                  and GET and DELETE get 405, as a modern-only server answers.
                                  Prints `listening <port>` as --http does.

Tools:
    echo  {text}                    -> text
    add   {a, b}                    -> a + b (as text)
    slow  {seconds: float, steps: int}
                                    -> one notifications/progress per step (progress i of
                                       steps, when the request has a progress token), sleeping
                                       seconds/steps between steps; returns
                                       "slow done after N steps"
    stats {}                        -> JSON text {"slow_started", "slow_finished",
                                       "slow_cancelled"}: counters for this process. A `slow`
                                       call interrupted by notifications/cancelled counts as
                                       cancelled (the SDK cancels the handler's scope).
    greet {}                        -> asks the client its name (a form elicitation, schema
                                       {name: string}) and answers "hello <name>"
    trip  {}                        -> asks the client's name, then (a question that depends
                                       on it) a city, and reads the client's roots: answers
                                       "<name> goes to <city> with <n> roots"
    The input requests use the SDK's resolvers (`Resolve`, `Elicit`, `ListRoots`): on a
    2026-07-28 request they become an `InputRequiredResult` (one round per resolver that waits
    on another, `requestState` sealed by the SDK) and the client's retry carries the answers;
    on a legacy session they are server requests sent mid-call. A client that did not declare
    the capability gets -32021 in either era.
"""

from __future__ import annotations

import json
import socket
import sys

from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve
from mcp_types import ListRootsResult
from pydantic import BaseModel

USAGE = "usage: py_server.py [--http <port> [--modern] | --sse <port>]"
MODERN = "2026-07-28"

app = MCPServer("taskgate-interop-py-server", version="1.0.0", log_level="WARNING")

STATS = {"slow_started": 0, "slow_finished": 0, "slow_cancelled": 0}


@app.tool(description="Returns its text argument unchanged", structured_output=False)
def echo(text: str) -> str:
    return text


@app.tool(description="Adds two numbers", structured_output=False)
def add(a: float, b: float) -> str:
    total = a + b
    return str(int(total)) if total == int(total) else str(total)


@app.tool(
    description="Takes `seconds` in `steps` steps, reporting progress after each step",
    structured_output=False,
)
async def slow(ctx: Context, seconds: float = 1.0, steps: int = 3) -> str:
    steps = max(1, int(steps))
    STATS["slow_started"] += 1
    try:
        for i in range(1, steps + 1):
            await anyio.sleep(max(0.0, seconds) / steps)
            await ctx.report_progress(i, steps, f"step {i} of {steps}")
    except anyio.get_cancelled_exc_class():
        STATS["slow_cancelled"] += 1
        print(f"py_server: slow cancelled (started {STATS['slow_started']})", file=sys.stderr, flush=True)
        raise
    STATS["slow_finished"] += 1
    return f"slow done after {steps} steps"


@app.tool(description="Counters of slow calls in this process, as JSON text", structured_output=False)
def stats() -> str:
    return json.dumps(STATS)


class Name(BaseModel):
    name: str


class City(BaseModel):
    city: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def ask_city(name: Annotated[Name, Resolve(ask_name)]) -> Elicit[City]:
    return Elicit(f"Where to, {name.name}?", City)


def client_roots() -> ListRoots:
    return ListRoots()


@app.tool(description="Asks the client its name and greets it", structured_output=False)
def greet(name: Annotated[Name, Resolve(ask_name)]) -> str:
    return f"hello {name.name}"


@app.tool(description="Asks a name, then a city, and reads the roots", structured_output=False)
def trip(
    name: Annotated[Name, Resolve(ask_name)],
    city: Annotated[City, Resolve(ask_city)],
    roots: Annotated[ListRootsResult, Resolve(client_roots)],
) -> str:
    return f"{name.name} goes to {city.city} with {len(roots.roots)} roots"


def modern_only(inner):
    """ASGI middleware: only 2026-07-28 requests reach `inner` (see --modern)."""

    async def asgi(scope, receive, send):
        if scope["type"] != "http":
            return await inner(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["method"] in ("GET", "DELETE"):
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST")]})
            await send({"type": "http.response.body", "body": b""})
            return
        requested = headers.get("mcp-protocol-version")
        if scope["method"] == "POST" and requested != MODERN:
            body = json.dumps({
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": [MODERN], "requested": requested or "(none)"},
                },
            }).encode()
            await send({
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json")],
            })
            await send({"type": "http.response.body", "body": body})
            return
        return await inner(scope, receive, send)

    return asgi


async def serve_http(port: int, transport: str = "http", modern: bool = False) -> None:
    import uvicorn

    # Bind the socket ourselves so that port 0 gives a port we can print before serving.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    bound = sock.getsockname()[1]

    if transport == "sse":
        starlette_app = app.sse_app(sse_path="/sse", message_path="/messages/", host="127.0.0.1")
    else:
        starlette_app = app.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    asgi_app = modern_only(starlette_app) if modern else starlette_app
    config = uvicorn.Config(asgi_app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.01)
        print(f"listening {bound}", flush=True)


def main() -> None:
    args = sys.argv[1:]
    if not args:
        app.run("stdio")
        return
    modern = args[2:] == ["--modern"] and args[0] == "--http"
    if (
        len(args) not in (2, 3)
        or (len(args) == 3 and not modern)
        or args[0] not in ("--http", "--sse")
        or not args[1].isdigit()
        or int(args[1]) > 65535
    ):
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    anyio.run(serve_http, int(args[1]), args[0][2:], modern)


if __name__ == "__main__":
    main()
