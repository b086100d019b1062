#!/usr/bin/env python3
"""One cell of the compatibility matrix (tests/compatibility.rs), driven by the Python SDK's
`mcp.Client` (tests/interop/.venv, mcp==2.3.0). Run it with that venv's python:

    py_cell.py <auto|legacy> <cell-json>

`auto` is the client's default: `server/discover` first (2026-07-28), `initialize` on a
refusal; `legacy` is `initialize` only (the SDK offers its newest handshake version).
<cell-json> as for ts_cell.mjs; the target is {"stdio": [...]} or {"http": url}. The SDK's
client has no task API, so the only task step it runs is a bridged one: a plain `tools/call`
of a tool the server requires as a task.

Prints one line, `CELL <json>` ({"version", "steps": [{"step", "ok", "detail"}]}), stopping at
the first failed step; exits 0 when every step passed.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters

TIMEOUT_S = int(os.environ.get("COMPAT_TIMEOUT_MS", "60000")) / 1000.0


class StepFailed(Exception):
    pass


def text(result) -> str:
    return "\n".join(c.text for c in (result.content or []) if getattr(c, "type", None) == "text")


def expect_text(result, want: str) -> None:
    if result.is_error:
        raise StepFailed(f"isError: {text(result)[:200]}")
    if want not in text(result):
        raise StepFailed(f"result lacks {want!r}: {text(result)[:200]}")


def leaves(e: BaseException) -> list[BaseException]:
    if isinstance(e, BaseExceptionGroup):
        return [x for sub in e.exceptions for x in leaves(sub)]
    return [e]


async def run(mode: str, cell: dict, out: dict) -> None:
    t = cell["target"]
    if "stdio" in t:
        target: object = StdioServerParameters(command=t["stdio"][0], args=t["stdio"][1:], env=dict(os.environ))
    else:
        target = t["http"]

    async def step(name: str, fn) -> None:
        try:
            detail = await fn()
        except Exception as e:
            out["steps"].append({"step": name, "ok": False, "detail": f"{type(e).__name__}: {e}"[:300]})
            raise StepFailed() from None
        out["steps"].append({"step": name, "ok": True, "detail": detail or ""})

    connected = False
    try:
        async with Client(target, mode=mode) as client:  # type: ignore[arg-type]
            connected = True
            out["version"] = client.protocol_version
            out["steps"].append({"step": "connect", "ok": True, "detail": client.protocol_version})

            async def tools():
                names: list[str] = []
                cursor = None
                for _ in range(20):
                    page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
                    names += [x.name for x in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                if cell["list"] not in names:
                    raise StepFailed(f"{cell['list']} not listed (got {', '.join(names)[:200]})")
                return f"{len(names)} tools"

            await step("tools/list", tools)

            async def call():
                expect_text(await client.call_tool(cell["call"]["name"], cell["call"]["arguments"]), cell["call"]["expect"])

            await step("tools/call", call)
            task = cell.get("task")
            if task and task["kind"] == "bridged":

                async def bridged():
                    expect_text(await client.call_tool(task["name"], task["arguments"]), task["expect"])
                    return "bridged"

                await step("task", bridged)
    except StepFailed:
        pass
    except BaseException as e:
        if isinstance(e, anyio.get_cancelled_exc_class()):
            raise
        if not connected:
            x = leaves(e)[0]
            out["steps"].append({"step": "connect", "ok": False, "detail": f"{type(x).__name__}: {x}"[:300]})
        elif out["steps"] and out["steps"][-1]["ok"]:
            x = leaves(e)[0]
            out["steps"].append({"step": "close", "ok": False, "detail": f"{type(x).__name__}: {x}"[:300]})


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("auto", "legacy"):
        print("usage: py_cell.py <auto|legacy> <cell-json>", file=sys.stderr)
        return 2
    out: dict = {"version": None, "steps": []}

    async def bounded():
        with anyio.move_on_after(TIMEOUT_S) as scope:
            await run(sys.argv[1], json.loads(sys.argv[2]), out)
        if scope.cancelled_caught:
            out["steps"].append({"step": "timeout", "ok": False, "detail": f"no end within {TIMEOUT_S:.0f} s"})

    anyio.run(bounded)
    print("CELL " + json.dumps(out), flush=True)
    return 0 if out["steps"] and all(s["ok"] for s in out["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
