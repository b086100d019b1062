#!/usr/bin/env python3
"""Interop client peer: the official Python SDK `mcp.Client` (mcp==2.3.0, see requirements.txt).

Run it with tests/interop/.venv/bin/python:

    py_client.py <scenario> [--mode auto|legacy] [--expect-protocol <version>] <url>
    py_client.py <scenario> [--mode auto|legacy] [--expect-protocol <version>] --http <url>
    py_client.py <scenario> [--mode auto|legacy] [--expect-protocol <version>] --stdio <command> [args...]

Scenarios: everything (against @modelcontextprotocol/server-everything), demo (against
taskgate's built-in demo, a call given up on included), pyserver (against py_server.py: echo, progress from `slow`),
pyinput (against py_server.py: `greet` and `trip`, whose elicitations the client answers
with a name "py" and a city "paris", and whose roots/list it answers with one root),
longcalls (taskgate's long calls in front of its built-in demo, `[upstream.long_calls]` with
`defer_after` and `wait_max` under 2 s: every request has a 2 s read timeout, a 6 s `slow` call
is answered with a task id, `taskgate_wait` until its result, `taskgate_cancel`, and, in a
legacy session, a second session refused the first one's task id like an unknown one; it
prints `figure deferred_ms <n>`, `figure waits <n>` and `figure result_ms <n>` lines).

The default mode is the client's own default, "auto": it sends `server/discover` first and
falls back to `initialize` on a JSON-RPC error or HTTP 4xx. `--expect-protocol` adds a check
that the connection negotiated that protocol version (e.g. 2026-07-28: the client did not fall
back).

Prints one line per check, `ok <check>` or `FAIL <check>: <why>`, stops at the first failure
(exit 1) and ends with `PASS <scenario>: <n> checks` (exit 0). A global timeout
(INTEROP_TIMEOUT_MS, default 60000) fails the running check and exits 1. Usage errors exit 2.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import warnings

import anyio
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters

SCENARIOS = ("everything", "demo", "pyserver", "pyinput", "longcalls", "policy")
USAGE = (
    "usage: py_client.py <everything|demo|pyserver|pyinput|longcalls> [--mode auto|legacy] [--expect-protocol <version>] "
    "(<url> | --http <url> | --stdio <command> [args...])"
)
TIMEOUT_S = int(os.environ.get("INTEROP_TIMEOUT_MS", "60000")) / 1000.0


class CheckFailed(Exception):
    pass


def parse_args(argv: list[str]) -> tuple[str, str, str | None, object]:
    if len(argv) < 2 or argv[0] not in SCENARIOS:
        raise SystemExit(USAGE)
    scenario, rest = argv[0], argv[1:]
    mode = "auto"
    if rest and rest[0] == "--mode":
        if len(rest) < 2 or rest[1] not in ("auto", "legacy"):
            raise SystemExit(USAGE)
        mode, rest = rest[1], rest[2:]
    expected = None
    if rest and rest[0] == "--expect-protocol":
        if len(rest) < 2:
            raise SystemExit(USAGE)
        expected, rest = rest[1], rest[2:]
    if not rest:
        raise SystemExit(USAGE)
    if rest[0] == "--stdio":
        if len(rest) < 2:
            raise SystemExit(USAGE)
        target: object = StdioServerParameters(command=rest[1], args=rest[2:], env=dict(os.environ))
    elif rest[0] == "--http":
        if len(rest) != 2:
            raise SystemExit(USAGE)
        target = rest[1]
    elif len(rest) == 1 and rest[0].startswith(("http://", "https://")):
        target = rest[0]
    else:
        raise SystemExit(USAGE)
    return scenario, mode, expected, target


def texts(result) -> str:
    return "\n".join(c.text for c in (result.content or []) if getattr(c, "type", None) == "text")


def brief(value) -> str:
    s = str(value)
    return s if len(s) <= 300 else s[:300] + "..."


class Runner:
    def __init__(self) -> None:
        self.current = "startup"
        self.passed = 0

    async def check(self, name: str, fn) -> None:
        self.current = name
        try:
            await fn()
        except CheckFailed as e:
            raise CheckFailed(f"{name}: {e}") from None
        except Exception as e:  # any SDK or transport error fails the check
            raise CheckFailed(f"{name}: {type(e).__name__}: {e}") from None
        self.passed += 1
        print(f"ok {name}", flush=True)


def expect(cond: bool, why: str) -> None:
    if not cond:
        raise CheckFailed(why)


async def run(scenario: str, mode: str, expected: str | None, target: object, r: Runner) -> None:
    r.current = "connect"
    connected = False
    try:
        callbacks = INPUT_CALLBACKS if scenario == "pyinput" else {"elicitation_callback": answer_elicitation}
        if scenario == "longcalls":
            callbacks = {"read_timeout_seconds": LONG_CALLS_TIMEOUT_S}
        # Another connection like this one (over HTTP another session, over stdio another process).
        connect = functools.partial(Client, target, mode=mode, **callbacks)  # type: ignore[arg-type]
        async with connect() as client:
            connected = True
            r.passed += 1
            print("ok connect", flush=True)
            info = client.server_info
            print(
                f"py_client: protocol {client.protocol_version}, server {info.name if info else None}",
                file=sys.stderr,
                flush=True,
            )
            if expected is not None:

                async def negotiated():
                    expect(client.protocol_version == expected, f"negotiated {client.protocol_version}, want {expected}")

                await r.check(f"protocol {expected}", negotiated)
            scenarios = {"everything": everything, "demo": demo, "pyserver": pyserver, "pyinput": pyinput, "policy": policy}
            if scenario == "longcalls":
                await longcalls(client, r, connect)
            else:
                await scenarios[scenario](client, r)
    except BaseException as e:
        if connected or isinstance(e, (CheckFailed, anyio.get_cancelled_exc_class())):
            raise
        found = leaves(e)
        if any(isinstance(x, (CheckFailed, TimeoutError, anyio.get_cancelled_exc_class())) for x in found):
            raise
        x = found[0]
        raise CheckFailed(f"connect: {type(x).__name__}: {x}") from None


ELICITED: list[str] = []


async def answer_elicitation(context, params) -> types.ElicitResult:
    """Answers every form elicitation with {"answer": "forty-two"} and remembers its message."""
    ELICITED.append(getattr(params, "message", ""))
    return types.ElicitResult(action="accept", content={"answer": "forty-two"})


async def check_elicitation(client, r: Runner) -> None:
    """The demo's `ask` elicits its question; over 2026-07-28 the SDK answers the gateway's
    InputRequiredResult and retries, over legacy it answers a server request."""

    async def fn():
        before = len(ELICITED)
        res = await client.call_tool("ask", {"question": "meaning of life?"})
        expect(not res.is_error, f"isError: {brief(texts(res))}")
        expect(texts(res) == "answer: forty-two", f"unexpected ask text: {brief(texts(res))}")
        expect(ELICITED[before:] == ["meaning of life?"], f"elicited {ELICITED[before:]}")

    await r.check("elicitation", fn)


async def check_tools(client, r: Runner, wanted: list[str]) -> None:
    async def fn():
        res = await client.list_tools()
        names = [t.name for t in res.tools]
        missing = [n for n in wanted if n not in names]
        expect(not missing, f"missing tools {', '.join(missing)} (got: {', '.join(names)})")

    await r.check("tools/list", fn)


async def check_echo(client, r: Runner, args: dict, want: str) -> None:
    async def fn():
        res = await client.call_tool("echo", args)
        expect(not res.is_error, f"isError: {brief(texts(res))}")
        expect(texts(res) == want, f"unexpected echo text: {brief(texts(res))}")

    await r.check("tools/call echo", fn)


async def check_resource(client, r: Runner, uri: str | None) -> None:
    chosen: dict[str, str] = {}

    async def list_fn():
        res = await client.list_resources()
        uris = [str(x.uri) for x in res.resources]
        expect(len(uris) > 0, "no resources listed")
        if uri is not None:
            expect(uri in uris, f"{uri} not listed (got: {brief(uris)})")
        chosen["uri"] = uri if uri is not None else uris[0]

    async def read_fn():
        u = chosen["uri"]
        res = await client.read_resource(u)
        expect(len(res.contents) > 0, f"no contents for {u}")
        c = res.contents[0]
        expect(str(c.uri) == u, f"content uri {c.uri} != {u}")
        body = getattr(c, "text", None) or getattr(c, "blob", None)
        expect(bool(body), f"empty content for {u}")

    await r.check("resources/list", list_fn)
    await r.check("resources/read", read_fn)


async def check_prompt(client, r: Runner, name: str, args: dict | None, want: str) -> None:
    async def list_fn():
        res = await client.list_prompts()
        names = [p.name for p in res.prompts]
        expect(name in names, f"prompt {name} not listed (got: {', '.join(names)})")

    async def get_fn():
        res = await client.get_prompt(name, args)
        expect(len(res.messages) > 0, f"prompt {name} returned no messages")
        text = "\n".join(
            getattr(m.content, "text", "") for m in res.messages if getattr(m.content, "type", None) == "text"
        )
        expect(want in text, f'prompt text lacks "{want}": {brief(text)}')

    await r.check("prompts/list", list_fn)
    await r.check("prompts/get", get_fn)


async def check_progress(client, r: Runner, tool: str, args: dict, min_count: int) -> None:
    async def fn():
        events: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            events.append(progress)

        res = await client.call_tool(tool, args, progress_callback=on_progress)
        expect(not res.is_error, f"isError: {brief(texts(res))}")
        # Progress callbacks may run just after the result: give stragglers a moment.
        with anyio.move_on_after(2):
            while len(events) < min_count:
                await anyio.sleep(0.02)
        expect(len(events) >= min_count, f"expected >= {min_count} progress notifications, got {len(events)}")
        expect(all(b > a for a, b in zip(events, events[1:])), f"progress not increasing: {events}")

    await r.check("progress", fn)


async def check_cancel(client, r: Runner) -> None:
    """A call the client gives up on reaches the server as a cancellation at once: at 2026-07-28
    the SDK aborts the request's POST (closing its response is the cancellation), at 2025-11-25
    it sends `notifications/cancelled`. Waited for well under the gateway's 15 s keep-alive."""

    async def cancelled() -> int:
        res = await client.read_resource("demo://stats")
        return json.loads(res.contents[0].text)["cancelled"]

    async def fn():
        before = await cancelled()
        with anyio.move_on_after(0.5):
            await client.call_tool("slow", {"duration_ms": 60000, "steps": 60})
        with anyio.move_on_after(5):
            while await cancelled() <= before:
                await anyio.sleep(0.05)
        expect(await cancelled() > before, "the demo was not told to stop the call within 5 s")

    await r.check("cancel", fn)


async def everything(client, r: Runner) -> None:
    # Names and arguments as listed by @modelcontextprotocol/server-everything 2026.8.31.
    await check_tools(client, r, ["echo", "trigger-long-running-operation"])
    await check_echo(client, r, {"message": "hello interop"}, "Echo: hello interop")
    await check_resource(client, r, None)
    await check_prompt(client, r, "simple-prompt", None, "simple prompt")
    await check_progress(client, r, "trigger-long-running-operation", {"duration": 1, "steps": 3}, 2)


async def demo(client, r: Runner) -> None:
    await check_tools(client, r, ["echo", "add", "slow", "fail", "ask"])
    await check_echo(client, r, {"text": "hello demo"}, "hello demo")
    await check_resource(client, r, "demo://readme")
    await check_prompt(client, r, "greet", {"name": "interop"}, "interop")
    await check_progress(client, r, "slow", {"duration_ms": 300, "steps": 3}, 2)
    await check_elicitation(client, r)
    await check_cancel(client, r)


async def pyserver(client, r: Runner) -> None:
    await check_tools(client, r, ["echo", "add", "slow", "stats"])
    await check_echo(client, r, {"text": "hello py_server"}, "hello py_server")
    await check_progress(client, r, "slow", {"seconds": 0.6, "steps": 3}, 2)


async def policy(client, r: Runner) -> None:
    """The demo behind `[upstream.tools] deny = ["add"]` and a bucket of 2 calls."""

    async def unlisted():
        names = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
        expect("echo" in names and "add" not in names, f"tools: {names}")

    await r.check("a denied tool is not listed", unlisted)

    async def unknown():
        try:
            res = await client.call_tool("add", {"a": 1, "b": 2})
        except MCPError as e:
            expect(e.error.code == -32602 and 'unknown tool "add"' in e.error.message, f"error: {e.error}")
            return
        expect(False, f"add answered: {res}")

    await r.check("a denied tool is refused as unknown", unknown)

    async def limited():
        for text in ("one", "two"):
            res = await client.call_tool("echo", {"text": text})
            expect(res.content[0].text == text, f"echo: {res}")
        try:
            res = await client.call_tool("echo", {"text": "three"})
        except MCPError as e:
            print(f"py_client: past the bucket: {e.error.code} {e.error.message} {e.error.data}", file=sys.stderr)
            data = e.error.data or {}
            expect(isinstance(data.get("retryAfterMs"), int) and "rate limit" in e.error.message, f"error: {e.error}")
            return
        expect(False, f"the third call answered: {res}")

    await r.check("a call past the bucket is refused, saying when to retry", limited)


ASKED: list[str] = []


async def on_elicit(context, params):
    from mcp_types import ElicitResult

    ASKED.append(params.message)
    props = (getattr(params, "requested_schema", None) or {}).get("properties", {})
    content = {k: ("paris" if k == "city" else "py") for k in props}
    return ElicitResult(action="accept", content=content)


async def on_roots(context):
    from mcp_types import ListRootsResult, Root

    ASKED.append("roots")
    return ListRootsResult(roots=[Root(uri="file:///tmp", name="tmp")])


INPUT_CALLBACKS = {"elicitation_callback": on_elicit, "list_roots_callback": on_roots}


async def pyinput(client, r: Runner) -> None:
    await check_tools(client, r, ["greet", "trip"])

    async def greet():
        ASKED.clear()
        res = await client.call_tool("greet", {})
        expect(not res.is_error, f"isError: {brief(texts(res))}")
        expect(texts(res) == "hello py", f"unexpected greeting {brief(texts(res))}")
        expect(ASKED == ["What is your name?"], f"asked {ASKED}")

    await r.check("tools/call greet (one elicitation)", greet)

    async def trip():
        ASKED.clear()
        res = await client.call_tool("trip", {})
        expect(not res.is_error, f"isError: {brief(texts(res))}")
        expect(texts(res) == "py goes to paris with 1 roots", f"got {brief(texts(res))}")
        expect(sorted(ASKED) == sorted(["What is your name?", "roots", "Where to, py?"]), f"asked {ASKED}")

    await r.check("tools/call trip (two rounds)", trip)


# ---- long calls (taskgate's `[upstream.long_calls]`, for a client without tasks) ----

LONG_CALLS_TIMEOUT_S = 2.0
LONG_CALL = {"duration_ms": 6000, "steps": 3}
STILL_LONGER = {"duration_ms": 30000, "steps": 30}
NO_SUCH_TASK = "taskgate-interop-no-such-task"
GATEWAY_TOOLS = ("taskgate_wait", "taskgate_status", "taskgate_cancel")
MODERN_VERSIONS = ("2026-07-28",)


def still_running(res, what: str, task: str | None = None) -> dict:
    """A "still running" answer's structuredContent, its shape checked."""
    sc = res.structured_content
    expect(not res.is_error, f"{what}: isError: {brief(texts(res))}")
    expect(isinstance(sc, dict) and isinstance(sc.get("taskId"), str), f"{what}: no taskId: {brief(res)}")
    expect(task is None or sc["taskId"] == task, f"{what}: taskId {sc['taskId']}, want {task}")
    expect(sc.get("status") == "working", f"{what}: status {sc.get('status')}, want working")
    expect(sc.get("waitTool") == "taskgate_wait", f"{what}: waitTool {sc.get('waitTool')}")
    expect(sc["taskId"] in texts(res) and "taskgate_wait" in texts(res), f"{what}: text {brief(texts(res))}")
    return sc


async def longcalls(client, r: Runner, connect) -> None:
    seen: dict = {}

    async def stopped() -> int:
        res = await client.read_resource("demo://stats", cache_mode="bypass")
        return json.loads(res.contents[0].text)["cancelled"]

    async def listed():
        names: list[list[str]] = []
        cursor = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            names.append([t.name for t in page.tools])
            cursor = page.next_cursor
            if not cursor:
                break
        every = [n for page in names for n in page]
        expect("slow" in every, f"slow not listed: {every}")
        expect(all(t in names[-1] for t in GATEWAY_TOOLS), f"the gateway's tools not on the last page: {names}")

    await r.check("tools/list: slow and the gateway tools, on the last page", listed)

    async def deferred():
        started = time.monotonic()
        res = await client.call_tool("slow", LONG_CALL)
        took = time.monotonic() - started
        seen.update(task=still_running(res, "the call")["taskId"], started=started)
        expect(took < LONG_CALLS_TIMEOUT_S, f"answered after {took:.3f} s")
        print(f"figure deferred_ms {round(took * 1000)}", flush=True)

    await r.check("tools/call slow 6 s: a deferred answer within the 2 s read timeout", deferred)

    async def status():
        res = await client.call_tool("taskgate_status", {"taskId": seen["task"]})
        expect((res.structured_content or {}).get("status") == "working", f"status: {brief(res)}")

    await r.check("taskgate_status: working", status)

    async def wait_until_done():
        for waits in range(1, 21):
            res = await client.call_tool("taskgate_wait", {"taskId": seen["task"]})
            if res.structured_content is None:
                took = time.monotonic() - seen["started"]
                print(f"figure waits {waits}", flush=True)
                print(f"figure result_ms {round(took * 1000)}", flush=True)
                expect(not res.is_error and texts(res) == "done after 3 steps", f"result {brief(res)}")
                expect(len(res.content) == 1, f"result {brief(res)}")
                seen["result"] = res
                return
            still_running(res, f"wait {waits}", seen["task"])
        raise CheckFailed("no result after 20 waits")

    await r.check("taskgate_wait until the tool's own result", wait_until_done)

    async def again():
        res = await client.call_tool("taskgate_wait", {"taskId": seen["task"]})
        expect(res == seen["result"], f"got {brief(res)}, want {brief(seen['result'])}")

    await r.check("taskgate_wait again: the same result", again)

    async def cancel():
        before = await stopped()
        task = still_running(await client.call_tool("slow", STILL_LONGER), "the long call")["taskId"]
        res = await client.call_tool("taskgate_cancel", {"taskId": task})
        expect((res.structured_content or {}).get("status") == "cancelled", f"cancel: {brief(res)}")
        res = await client.call_tool("taskgate_status", {"taskId": task})
        expect((res.structured_content or {}).get("status") == "cancelled", f"status: {brief(res)}")
        with anyio.move_on_after(5):
            while await stopped() <= before:
                await anyio.sleep(0.05)
        expect(await stopped() > before, "the demo was not told to stop the call within 5 s")
        try:
            res = await client.call_tool("taskgate_wait", {"taskId": task})
            raise CheckFailed(f"the cancelled call's wait answered {brief(res)}, want a JSON-RPC error")
        except MCPError as e:
            print(f"py_client: the cancelled call's wait: {e.code} {e}", file=sys.stderr, flush=True)
        res = await client.call_tool("taskgate_cancel", {"taskId": task})
        expect(res.is_error, f"cancel again: {brief(res)}")

    await r.check("taskgate_cancel stops a deferred call (and the upstream call)", cancel)

    async def unknown():
        for name in GATEWAY_TOOLS:
            res = await client.call_tool(name, {"taskId": NO_SUCH_TASK})
            expect(res.is_error and NO_SUCH_TASK in texts(res), f"{name}: {brief(res)}")

    await r.check("an unknown task id: a tool error for each tool", unknown)

    async def other_session():
        task = still_running(await client.call_tool("slow", STILL_LONGER), "a long call")["taskId"]
        answers = []
        async with connect() as other:
            for name in GATEWAY_TOOLS:
                answers.append((name, await other.call_tool(name, {"taskId": task})))
                answers.append((name, await other.call_tool(name, {"taskId": NO_SUCH_TASK})))
        # Checked out here: a failure inside the client's task group would come out wrapped.
        for (name, theirs), (_, never) in zip(answers[::2], answers[1::2]):
            expect(theirs.is_error and never.is_error, f"{name}: {brief(theirs)} / {brief(never)}")
            a, b = texts(theirs).replace(task, "X"), texts(never).replace(NO_SUCH_TASK, "X")
            expect(a == b, f"{name}: {brief(a)} differs from the unknown id's {brief(b)}")
        res = await client.call_tool("taskgate_status", {"taskId": task})
        expect((res.structured_content or {}).get("status") == "working", f"status after: {brief(res)}")
        await client.call_tool("taskgate_cancel", {"taskId": task})

    # A 2026-07-28 client has no session: its deferred call's task is known by its id alone
    # (docs/tasks.md, "Long calls"), and the SDK refuses to send `ping` at that version.
    if client.protocol_version in MODERN_VERSIONS:
        print("py_client: 2026-07-28: no other session to refuse, no ping", file=sys.stderr, flush=True)
        return
    await r.check("another session: refused as an unknown id", other_session)

    async def ping():
        await client.send_ping()

    await r.check("ping", ping)


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside (possibly nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def one_line(text: str) -> str:
    return " ".join(text.split())


async def main_async(scenario: str, mode: str, expected: str | None, target: object) -> int:
    r = Runner()
    try:
        with anyio.fail_after(TIMEOUT_S):
            await run(scenario, mode, expected, target, r)
    except BaseException as e:  # report the first real cause, unwrapped from task-group wrappers
        found = leaves(e)
        failed = next((x for x in found if isinstance(x, CheckFailed)), None)
        if failed is not None:
            print(f"FAIL {one_line(str(failed))}", flush=True)
        elif any(isinstance(x, TimeoutError) for x in found):
            print(f"FAIL {r.current}: global timeout after {int(TIMEOUT_S * 1000)} ms", flush=True)
        else:
            x = found[0]
            print(f"FAIL {r.current}: {type(x).__name__}: {one_line(str(x))}", flush=True)
        return 1
    print(f"PASS {scenario}: {r.passed} checks", flush=True)
    return 0


def main() -> None:
    try:
        scenario, mode, expected, target = parse_args(sys.argv[1:])
    except SystemExit as e:
        print(e, file=sys.stderr)
        sys.exit(2)
    warnings.simplefilter("ignore")  # deprecation notes about 2026-07-28 features are noise here
    sys.exit(anyio.run(main_async, scenario, mode, expected, target))


if __name__ == "__main__":
    main()
