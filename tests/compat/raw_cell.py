#!/usr/bin/env python3
"""One cell of the compatibility matrix (tests/compatibility.rs), driven by a raw 2026-07-28
client: no SDK, JSON-RPC written by hand, each request carrying its version, capabilities and
client info in `_meta` (no `initialize`, no session), over plain HTTP POSTs with the
`MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers that mirror the body, or as lines
on a stdio server's stdin. Standard library only.

    python3 raw_cell.py <cell-json>

<cell-json> as for ts_cell.mjs; the target is {"stdio": [...]} or {"http": url}. Steps:
`server/discover` (2026-07-28 must be among `supportedVersions`), `tools/list`, `tools/call`;
a hosted or relayed task declares the tasks extension (`io.modelcontextprotocol/tasks`) and
expects a `resultType: "task"` answer, followed with `tasks/get` until the result is inlined; a
bridged one is a plain call that does not declare it.

Prints one line, `CELL <json>` ({"version", "steps": [{"step", "ok", "detail"}]}), stopping at
the first failed step; exits 0 when every step passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import queue

V = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
TIMEOUT_S = int(os.environ.get("COMPAT_TIMEOUT_MS", "60000")) / 1000.0


class StepFailed(Exception):
    pass


def meta(extension: bool) -> dict:
    caps: dict = {"extensions": {EXT: {}}} if extension else {}
    return {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "taskgate-compat-raw", "version": "1.0.0"},
    }


class Http:
    def __init__(self, url: str) -> None:
        self.url = url

    def request(self, msg: dict) -> dict:
        p = msg["params"]
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": V,
            "mcp-method": msg["method"],
        }
        name = p.get("name") if msg["method"] == "tools/call" else p.get("taskId")
        if name is not None:
            headers["mcp-name"] = name
        req = urllib.request.Request(self.url, data=json.dumps(msg).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                body = resp.read().decode()
                ctype = resp.headers.get("content-type", "")
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            try:
                return json.loads(body)
            except ValueError:
                raise StepFailed(f"HTTP {e.code}: {body[:200]}") from None
        if ctype.startswith("text/event-stream"):
            found = [
                json.loads(line[5:])
                for line in body.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
            found = [m for m in found if m.get("id") == msg["id"] and "method" not in m]
            if not found:
                raise StepFailed(f"no response in the event stream: {body[:200]}")
            return found[-1]
        return json.loads(body)

    def close(self) -> None:
        pass


class Stdio:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)
        self.lines.put(None)

    def request(self, msg: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError as e:
            raise StepFailed(f"the server closed its input: {e}") from None
        deadline = time.monotonic() + 30
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise StepFailed("no response within 30 s") from None
            if line is None:
                raise StepFailed(f"the server exited (status {self.proc.wait()})")
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if m.get("id") == msg["id"] and "method" not in m:
                return m

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=3)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def text(result: dict) -> str:
    return "\n".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text")


def expect_text(result: dict, want: str) -> None:
    if result.get("isError"):
        raise StepFailed(f"isError: {text(result)[:200]}")
    if want not in text(result):
        raise StepFailed(f"result lacks {want!r}: {text(result)[:200]}")


def run(cell: dict, out: dict) -> None:
    t = cell["target"]
    peer = Stdio(t["stdio"]) if "stdio" in t else Http(t["http"])
    ids = iter(range(1, 1000))

    def call(method: str, params: dict, extension: bool = False) -> dict:
        params = dict(params, _meta=meta(extension))
        m = peer.request({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params})
        if "error" in m:
            e = m["error"]
            raise StepFailed(f"{method}: {e.get('code')} {e.get('message', '')[:200]}")
        return m.get("result", {})

    def step(name: str, fn) -> None:
        try:
            detail = fn()
        except Exception as e:
            why = str(e) if isinstance(e, StepFailed) else f"{type(e).__name__}: {e}"
            out["steps"].append({"step": name, "ok": False, "detail": why[:300]})
            raise StepFailed() from None
        out["steps"].append({"step": name, "ok": True, "detail": detail or ""})

    def discover():
        r = call("server/discover", {})
        if V not in r.get("supportedVersions", []):
            raise StepFailed(f"supportedVersions {r.get('supportedVersions')}")
        out["version"] = V
        return V

    def tools():
        names: list[str] = []
        cursor = None
        for _ in range(20):
            page = call("tools/list", {"cursor": cursor} if cursor else {})
            names += [x["name"] for x in page.get("tools", [])]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        if cell["list"] not in names:
            raise StepFailed(f"{cell['list']} not listed (got {', '.join(names)[:200]})")
        return f"{len(names)} tools"

    def plain():
        expect_text(call("tools/call", {"name": cell["call"]["name"], "arguments": cell["call"]["arguments"]}), cell["call"]["expect"])

    def task():
        spec = cell["task"]
        args = {"name": spec["name"], "arguments": spec["arguments"]}
        if spec["kind"] == "bridged":
            expect_text(call("tools/call", args), spec["expect"])
            return "bridged"
        r = call("tools/call", args, extension=True)
        if spec["kind"] == "hosted" and r.get("resultType") == "complete":
            # The gateway hosts as the extension's servers decide: a call that ends within
            # plain_within is answered with its own result, no task made.
            expect_text(r, spec["expect"])
            return "hosted, answered plainly"
        if r.get("resultType") != "task":
            raise StepFailed(f"no task: resultType {r.get('resultType')!r}")
        tid = r["taskId"]
        for _ in range(200):
            if r.get("status") in ("completed", "failed", "cancelled"):
                break
            time.sleep(min(max(r.get("pollIntervalMs") or 250, 100), 1000) / 1000)
            r = call("tasks/get", {"taskId": tid}, extension=True)
        if r.get("status") != "completed" or "result" not in r:
            raise StepFailed(f"task ended {r.get('status')} {json.dumps(r.get('error'))[:150]}")
        expect_text(r["result"], spec["expect"])
        return spec["kind"]

    try:
        step("connect", discover)
        step("tools/list", tools)
        step("tools/call", plain)
        if cell.get("task"):
            step("task", task)
    except StepFailed:
        pass
    finally:
        peer.close()


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: raw_cell.py <cell-json>", file=sys.stderr)
        return 2
    out: dict = {"version": None, "steps": []}
    worker = threading.Thread(target=run, args=(json.loads(sys.argv[1]), out), daemon=True)
    worker.start()
    worker.join(TIMEOUT_S)
    if worker.is_alive():
        out["steps"].append({"step": "timeout", "ok": False, "detail": f"no end within {TIMEOUT_S:.0f} s"})
    print("CELL " + json.dumps(out), flush=True)
    return 0 if out["steps"] and all(s["ok"] for s in out["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
