#!/usr/bin/env python3
"""The conformance reference server: the official Python SDK's low-level `Server`
(mcp==2.3.0, pinned in tests/interop/requirements.txt) serving everything the server
scenarios of the official conformance suite (@modelcontextprotocol/conformance, pinned in
tests/conformance/package.json) call, by the names the suite uses. tests/conformance.rs runs
the suite against it directly and through the gateway, and compares.

It is dual era, as the SDK is: 2024-11-05 … 2025-11-25 over `initialize` sessions, and
2026-07-28 over `server/discover` and per-request `_meta` (stateless). It has no tasks of its
own: it declares no `tasks` capability and no tasks extension, and marks no tool with
`execution`.

Run it with tests/interop/.venv/bin/python:

    ref_server.py                   stdio (the default)
    ref_server.py --http <port>     Streamable HTTP on 127.0.0.1:<port>, path /mcp; port 0 picks a
                                    free port. Prints `listening <port>` on stdout once it accepts
                                    connections. Sessions keep their events for Last-Event-ID
                                    resumption. Stops on SIGTERM/SIGINT.
    --tasks                         (with either) also lists the tools the tasks extension's
                                    scenarios call (greet, slow_compute, failing_job,
                                    protocol_error_job, confirm_delete, multi_input,
                                    test_tool_with_task), all of them plain tools: the gateway
                                    hosts their tasks.

What each tool, resource and prompt does is in its description below; the texts are the ones
the suite's scenario descriptions ask for. Where a tool needs the client's input (sampling,
elicitation, roots), a legacy session gets a server request in the middle of the call, and a
2026-07-28 request gets an `InputRequiredResult` whose `requestState` is signed with a key of
this process (a tampered state is refused with -32602).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import os
import socket
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

warnings.simplefilter("ignore")  # the SDK warns about deprecated (but still served) capabilities

from mcp.server.caching import CacheHint  # noqa: E402
from mcp.server.lowlevel.server import NotificationOptions, Server  # noqa: E402
from mcp.server.streamable_http import EventMessage, EventStore  # noqa: E402
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.message import ServerMessageMetadata  # noqa: E402
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged  # noqa: E402

USAGE = "usage: ref_server.py [--http <port>] [--tasks]"

# A 1x1 red PNG and a 44-byte silent WAV header, base64.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64encode(
    b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (8000).to_bytes(4, "little") + (1).to_bytes(2, "little") + (8).to_bytes(2, "little")
    + b"data" + (0).to_bytes(4, "little")
).decode()

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("test_simple_text", "Returns a simple text", NO_ARGS),
    ("test_image_content", "Returns a 1x1 PNG image", NO_ARGS),
    ("test_audio_content", "Returns a short WAV audio clip", NO_ARGS),
    ("test_embedded_resource", "Returns an embedded text resource", NO_ARGS),
    ("test_multiple_content_types", "Returns text, an image and a resource", NO_ARGS),
    ("test_tool_with_logging", "Sends three info log messages while it runs", NO_ARGS),
    ("test_error_handling", "Always reports a tool error (isError)", NO_ARGS),
    ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", NO_ARGS),
    ("test_sampling", "Asks the client's model to answer a prompt", obj({"prompt": string("The prompt")}, ["prompt"])),
    (
        "test_elicitation",
        "Asks the user for a username and an email",
        obj({"message": string("The message to show the user")}, ["message"]),
    ),
    ("test_elicitation_sep1034_defaults", "Elicitation with defaults for every primitive type", NO_ARGS),
    ("test_elicitation_sep1330_enums", "Elicitation with the five enum schema variants", NO_ARGS),
    ("test_reconnection", "Closes its SSE stream before answering (the client resumes)", NO_ARGS),
    ("json_schema_2020_12_tool", "Takes a JSON Schema 2020-12 input schema", JSON_SCHEMA_2020_12),
    ("test_missing_capability", "Needs the client's sampling capability", NO_ARGS),
    ("test_streaming_elicitation", "Asks the user a question before answering", NO_ARGS),
    ("test_logging_tool", "Logs an info message, then answers", NO_ARGS),
    ("test_trigger_tool_change", "Announces that the tool list changed", NO_ARGS),
    ("test_trigger_prompt_change", "Announces that the prompt list changed", NO_ARGS),
    (
        "test_header_param",
        "Echoes its region argument, which is mirrored into the Mcp-Param-Region header",
        obj({"region": {"type": "string", "description": "A region", "x-mcp-header": "Region"}}, ["region"]),
    ),
    ("test_input_required_result_elicitation", "Asks the user's name, then greets", NO_ARGS),
    ("test_input_required_result_sampling", "Asks the client's model a question", NO_ARGS),
    ("test_input_required_result_list_roots", "Reads the client's roots", NO_ARGS),
    ("test_input_required_result_request_state", "Asks for a confirmation, keeping state", NO_ARGS),
    ("test_input_required_result_multiple_inputs", "Asks three things at once", NO_ARGS),
    ("test_input_required_result_multi_round", "Asks two questions, one round each", NO_ARGS),
    ("test_input_required_result_tampered_state", "Asks for a confirmation with signed state", NO_ARGS),
    ("test_input_required_result_capabilities", "Asks only for what the client declared", NO_ARGS),
]

TASK_TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("greet", "Greets a name at once", obj({"name": string("Who to greet")})),
    (
        "slow_compute",
        "Sleeps `seconds`, then answers with its label",
        obj({"seconds": {"type": "number", "description": "How long"}, "label": string("A label")}),
    ),
    ("failing_job", "Always reports a tool error (isError)", NO_ARGS),
    ("protocol_error_job", "Always fails with a JSON-RPC error", NO_ARGS),
    ("confirm_delete", "Asks the user to confirm deleting a file", obj({"filename": string("The file")})),
    ("multi_input", "Asks the user two questions at once", NO_ARGS),
    ("test_tool_with_task", "Asks the user's name, then greets it slowly", NO_ARGS),
]

RESOURCES = [
    ("test://static-text", "static-text", "A static text resource", "text/plain"),
    ("test://static-binary", "static-binary", "A static binary resource (a PNG)", "image/png"),
    ("test://watched-resource", "watched-resource", "A resource to subscribe to", "text/plain"),
]

PROMPTS = [
    ("test_simple_prompt", "A prompt without arguments", []),
    (
        "test_prompt_with_arguments",
        "A prompt with two arguments",
        [("arg1", "First test argument"), ("arg2", "Second test argument")],
    ),
    ("test_prompt_with_embedded_resource", "A prompt embedding a resource", [("resourceUri", "The resource's URI")]),
    ("test_prompt_with_image", "A prompt with an image", []),
    ("test_input_required_result_prompt", "A prompt that asks the user for context first", []),
]

bus = InMemorySubscriptionBus()
with_task_tools = False

# --- signed request state ----------------------------------------------------------------

STATE_KEY = os.urandom(32)


def seal(state: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
    mac = hmac.new(STATE_KEY, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def unseal(state: str | None) -> dict[str, Any] | None:
    """The state this process sealed, None for none; -32602 for any other."""
    if state is None:
        return None
    body, _, mac = state.rpartition(".")
    want = hmac.new(STATE_KEY, body.encode(), hashlib.sha256).hexdigest()
    if not body or not hmac.compare_digest(mac, want):
        raise MCPError(-32602, "requestState failed its integrity check")
    return json.loads(base64.urlsafe_b64decode(body.encode()))


# --- helpers -------------------------------------------------------------------------------


def modern(ctx: Any) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def text(value: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=is_error)


def caps(ctx: Any) -> types.ClientCapabilities:
    return ctx.session.client_capabilities or types.ClientCapabilities()


def elicit_request(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": required},
        },
    }


def sampling_request(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": max_tokens},
    }


ROOTS_REQUEST: dict[str, Any] = {"method": "roots/list", "params": {}}


def input_required(requests: dict[str, dict[str, Any]], state: dict[str, Any] | None = None) -> types.InputRequiredResult:
    return types.InputRequiredResult.model_validate(
        {"inputRequests": requests, **({"requestState": seal(state)} if state is not None else {})}
    )


def answers(params: Any) -> dict[str, Any]:
    """The client's input responses as plain JSON, each one an object (else -32602)."""
    raw = params.input_responses
    if raw is None:
        return {}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        dumped = value.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(value, "model_dump") else value
        if not isinstance(dumped, dict):
            raise MCPError(-32602, f"input response {key!r} is not an object")
        out[key] = dumped
    return out


ASKED = {
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


async def ask(ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    """A server request in the middle of a legacy call, on the call's own stream; its result
    as JSON."""
    request_type, result_type = ASKED[request["method"]]
    result = await ctx.session.send_request(
        request_type.model_validate(request),
        result_type,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def require(ctx: Any, capability: str) -> None:
    if getattr(caps(ctx), capability, None) is None:
        raise MCPError(
            -32021,
            "Missing required client capability",
            {"requiredCapabilities": {capability: {}}},
        )


# --- tools ---------------------------------------------------------------------------------


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    listed = TOOLS + (TASK_TOOLS if with_task_tools else [])
    return types.ListToolsResult(
        tools=[types.Tool(name=n, description=d, input_schema=s) for n, d, s in listed],
    )


def tool_schema(name: str) -> dict[str, Any] | None:
    for n, _, s in TOOLS + (TASK_TOOLS if with_task_tools else []):
        if n == name:
            return s
    return None


async def log(ctx: Any, level: str, message: str) -> None:
    await ctx.session.send_log_message(level, message, "ref_server", ctx.request_id)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
    name = params.name
    args = params.arguments or {}
    if tool_schema(name) is None:
        raise MCPError(-32602, f"unknown tool: {name}")
    if name == "test_simple_text":
        return text("This is a simple text response for testing.")
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        return types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="test://embedded-resource",
                        mime_type="text/plain",
                        text="This is an embedded resource content.",
                    ),
                )
            ]
        )
    if name == "test_multiple_content_types":
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="Multiple content types test:"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="test://mixed-content-resource",
                        mime_type="application/json",
                        text=json.dumps({"test": "data", "value": 123}),
                    ),
                ),
            ]
        )
    if name in ("test_tool_with_logging", "test_logging_tool"):
        await log(ctx, "info", "Tool execution started")
        await anyio.sleep(0.05)
        await log(ctx, "info", "Tool processing data")
        await anyio.sleep(0.05)
        await log(ctx, "info", "Tool execution completed")
        return text("Logging tool completed")
    if name in ("test_error_handling", "failing_job"):
        return text("This tool intentionally returns an error for testing", is_error=True)
    if name == "test_tool_with_progress":
        for step, value in enumerate((0, 50, 100)):
            if step:
                await anyio.sleep(0.05)
            await ctx.session.report_progress(value, 100, f"{value} of 100")
        return text("Progress tool completed")
    if name == "test_sampling":
        return await sampling_tool(ctx, params, str(args.get("prompt", "")))
    if name == "test_elicitation":
        return await legacy_elicitation(
            ctx,
            params,
            str(args.get("message", "")),
            {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            ["username", "email"],
            "User response: ",
        )
    if name == "test_elicitation_sep1034_defaults":
        return await legacy_elicitation(
            ctx,
            params,
            "Please review these defaults",
            {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "default": True},
            },
            [],
            "Elicitation completed: ",
        )
    if name == "test_elicitation_sep1330_enums":
        return await legacy_elicitation(
            ctx,
            params,
            "Please choose",
            {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
            [],
            "Elicitation completed: ",
        )
    if name == "test_reconnection":
        if ctx.close_sse_stream is not None:
            await anyio.sleep(0.1)
            await ctx.close_sse_stream()
        await anyio.sleep(0.3)
        return text("Reconnection test completed")
    if name == "json_schema_2020_12_tool":
        return text(f"received {json.dumps(args, sort_keys=True)}")
    if name == "test_missing_capability":
        require(ctx, "sampling")
        return text("sampling is declared")
    if name == "test_streaming_elicitation":
        return await legacy_elicitation(
            ctx, params, "Please answer", {"answer": {"type": "string"}}, ["answer"], "Answered: "
        )
    if name == "test_trigger_tool_change":
        await bus.publish(ToolsListChanged())
        return text("tool list change announced")
    if name == "test_trigger_prompt_change":
        await bus.publish(PromptsListChanged())
        return text("prompt list change announced")
    if name == "test_header_param":
        return text(f"region: {args.get('region')}")
    if name.startswith("test_input_required_result_"):
        return await mrtr_tool(ctx, params, name[len("test_input_required_result_"):])
    # The task tools (--tasks).
    if name == "greet":
        return text(f"Hello, {args.get('name', 'World')}!")
    if name == "slow_compute":
        seconds = float(args.get("seconds", 1) or 0)
        await anyio.sleep(max(0.0, min(seconds, 300.0)))
        return text(f"computed {args.get('label', '')} after {seconds:g} s")
    if name == "protocol_error_job":
        raise MCPError(-32603, "protocol_error_job failed on purpose")
    if name == "confirm_delete":
        filename = str(args.get("filename", ""))
        got = await gather(
            ctx,
            params,
            {"confirm": elicit_request(f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])},
        )
        if got is None or isinstance(got, types.InputRequiredResult):
            return got
        accepted = got["confirm"].get("action") == "accept" and got["confirm"].get("content", {}).get("confirm")
        return text(f"{'deleted' if accepted else 'kept'} {filename}")
    if name == "multi_input":
        got = await gather(
            ctx,
            params,
            {
                "name": elicit_request("Your name?", {"name": {"type": "string"}}, ["name"]),
                "confirm": elicit_request("Go on?", {"confirm": {"type": "boolean"}}, ["confirm"]),
            },
        )
        if got is None or isinstance(got, types.InputRequiredResult):
            return got
        return text(f"multi_input answered: {json.dumps(got, sort_keys=True)}")
    if name == "test_tool_with_task":
        got = await gather(
            ctx, params, {"user_name": elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"])}
        )
        if got is None or isinstance(got, types.InputRequiredResult):
            return got
        who = got["user_name"].get("content", {}).get("name", "nobody")
        await anyio.sleep(0.5)
        return text(f"Hello, {who}! (after a task)")
    raise MCPError(-32602, f"unknown tool: {name}")


async def gather(ctx: Any, params: Any, requests: dict[str, dict[str, Any]]) -> Any:
    """Asks every request: in a legacy session one server request each, in parallel; on a
    2026-07-28 request one InputRequiredResult for those not answered yet. Returns the answers
    by key once all are in."""
    if modern(ctx):
        got = {k: v for k, v in answers(params).items() if k in requests}
        missing = {k: v for k, v in requests.items() if k not in got}
        if missing:
            return input_required(missing)
        return got
    got = {}

    async def one(key: str, request: dict[str, Any]) -> None:
        got[key] = await ask(ctx, request)

    try:
        async with anyio.create_task_group() as tg:
            for key, request in requests.items():
                tg.start_soon(one, key, request)
    except BaseExceptionGroup as group:
        # The first question that failed fails the call, as it would alone.
        raise group.exceptions[0] from None
    return got


async def sampling_tool(ctx: Any, params: Any, prompt: str) -> Any:
    request = sampling_request(prompt, 100)
    if modern(ctx):
        require(ctx, "sampling")
        got = answers(params).get("sampling")
        if got is None:
            return input_required({"sampling": request})
    else:
        require(ctx, "sampling")
        got = await ask(ctx, request)
    content = got.get("content", {})
    reply = content.get("text", "") if isinstance(content, dict) else json.dumps(content)
    return text(f"LLM response: {reply}")


async def legacy_elicitation(
    ctx: Any, params: Any, message: str, properties: dict[str, Any], required: list[str], prefix: str
) -> Any:
    request = elicit_request(message, properties, required)
    require(ctx, "elicitation")
    if modern(ctx):
        got = answers(params).get("elicitation")
        if got is None:
            return input_required({"elicitation": request})
    else:
        got = await ask(ctx, request)
    return text(f"{prefix}action={got.get('action')}, content={json.dumps(got.get('content', {}), sort_keys=True)}")


async def mrtr_tool(ctx: Any, params: Any, which: str) -> Any:
    """The tools of the input-required-result-* scenarios (2026-07-28). In a legacy session
    they ask by server requests instead."""
    name_request = elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"])
    confirm_request = elicit_request("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
    if not modern(ctx):
        if which == "list_roots":
            got = await ask(ctx, ROOTS_REQUEST)
            return text(f"roots: {json.dumps(got.get('roots', []))}")
        got = await ask(ctx, name_request)
        return text(f"Hello, {got.get('content', {}).get('name', 'nobody')}!")
    state = unseal(params.request_state)
    got = answers(params)
    if which == "elicitation":
        if "user_name" not in got:
            return input_required({"user_name": name_request})
        return text(f"Hello, {got['user_name'].get('content', {}).get('name', 'nobody')}!")
    if which == "sampling":
        if "capital_question" not in got:
            return input_required({"capital_question": sampling_request("What is the capital of France?", 100)})
        content = got["capital_question"].get("content", {})
        return text(f"The model said: {content.get('text', '') if isinstance(content, dict) else content}")
    if which == "list_roots":
        if "client_roots" not in got:
            return input_required({"client_roots": ROOTS_REQUEST})
        roots = got["client_roots"].get("roots", [])
        return text(f"roots: {', '.join(r.get('uri', '') for r in roots)}")
    if which in ("request_state", "tampered_state"):
        if state is None or "confirm" not in got:
            return input_required({"confirm": confirm_request}, {"tool": which, "round": 1})
        if state.get("tool") != which:
            raise MCPError(-32602, "requestState belongs to another tool")
        return text("state-ok: confirmed")
    if which == "multiple_inputs":
        wanted = {
            "user_name": name_request,
            "greeting": sampling_request("Generate a greeting", 50),
            "client_roots": ROOTS_REQUEST,
        }
        if state is None or any(k not in got for k in wanted):
            return input_required({k: v for k, v in wanted.items() if k not in got}, {"tool": which})
        return text("all three answered")
    if which == "multi_round":
        if state is None:
            if "step1" in got:
                return input_required(
                    {"step2": elicit_request("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])},
                    {"tool": which, "round": 2, "name": got["step1"].get("content", {}).get("name")},
                )
            return input_required(
                {"step1": elicit_request("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])},
                {"tool": which, "round": 1},
            )
        if state.get("round") == 1:
            if "step1" not in got:
                return input_required(
                    {"step1": elicit_request("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])},
                    {"tool": which, "round": 1},
                )
            return input_required(
                {"step2": elicit_request("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])},
                {"tool": which, "round": 2, "name": got["step1"].get("content", {}).get("name")},
            )
        if "step2" not in got:
            return input_required(
                {"step2": elicit_request("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])},
                state,
            )
        return text(f"{state.get('name')} likes {got['step2'].get('content', {}).get('color')}")
    if which == "capabilities":
        declared = caps(ctx)
        wanted = {}
        if declared.sampling is not None:
            wanted["sampling"] = sampling_request("Say something", 20)
        if declared.elicitation is not None:
            wanted["elicitation"] = name_request
        if not wanted:
            return text("the client declared neither sampling nor elicitation")
        if any(k not in got for k in wanted):
            return input_required({k: v for k, v in wanted.items() if k not in got})
        return text("answered what was declared")
    raise MCPError(-32602, f"unknown tool: test_input_required_result_{which}")


# --- resources, prompts, completions, logging ------------------------------------------------


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri=u, name=n, description=d, mime_type=m) for u, n, d, m in RESOURCES]
    )


async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template="test://template/{id}/data",
                name="template-data",
                description="Data for an id",
                mime_type="application/json",
            )
        ]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "test://static-text":
        contents: list[Any] = [
            types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
            )
        ]
    elif uri == "test://static-binary":
        contents = [types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)]
    elif uri == "test://watched-resource":
        contents = [types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content.")]
    elif uri.startswith("test://template/") and uri.endswith("/data") and len(uri) > len("test://template//data"):
        ident = uri[len("test://template/") : -len("/data")]
        contents = [
            types.TextResourceContents(
                uri=uri,
                mime_type="application/json",
                text=json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}),
            )
        ]
    else:
        raise MCPError(-32602, "Resource not found", {"uri": uri})
    return types.ReadResourceResult(contents=contents)


async def subscribe(ctx: Any, params: Any) -> types.EmptyResult:
    return types.EmptyResult()


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(
                name=n,
                description=d,
                arguments=[types.PromptArgument(name=a, description=ad, required=True) for a, ad in args] or None,
            )
            for n, d, args in PROMPTS
        ]
    )


def user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
    args = params.arguments or {}
    name = params.name
    if name == "test_simple_prompt":
        messages = [user(types.TextContent(type="text", text="This is a simple prompt for testing."))]
    elif name == "test_prompt_with_arguments":
        text_ = f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"
        messages = [user(types.TextContent(type="text", text=text_))]
    elif name == "test_prompt_with_embedded_resource":
        messages = [
            user(
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri=args.get("resourceUri", "test://example-resource"),
                        mime_type="text/plain",
                        text="Embedded resource content for testing.",
                    ),
                )
            ),
            user(types.TextContent(type="text", text="Please process the embedded resource above.")),
        ]
    elif name == "test_prompt_with_image":
        messages = [
            user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
            user(types.TextContent(type="text", text="Please analyze the image above.")),
        ]
    elif name == "test_input_required_result_prompt":
        request = elicit_request("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
        if modern(ctx):
            got = answers(params).get("user_context")
            if got is None:
                return input_required({"user_context": request})
        else:
            got = await ask(ctx, request)
        context = got.get("content", {}).get("context", "")
        messages = [user(types.TextContent(type="text", text=f"Use this context: {context}"))]
    else:
        raise MCPError(-32602, f"unknown prompt: {name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    values = ["paris", "park", "party"]
    prefix = params.argument.value or ""
    matching = [v for v in values if v.startswith(prefix)] or values
    return types.CompleteResult(completion=types.Completion(values=matching, total=len(matching), has_more=False))


async def set_level(ctx: Any, params: Any) -> types.EmptyResult:
    return types.EmptyResult()


def build() -> Server[Any]:
    hint = CacheHint(ttl_ms=0, scope="private")
    server: Server[Any] = Server(
        "taskgate-conformance-ref-server",
        version="1.0.0",
        cache_hints={m: hint for m in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read")},
        get_tool_input_schema=tool_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=subscribe,
        on_subscriptions_listen=ListenHandler(bus),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
    )
    return server


NOTIFICATIONS = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)


class MemoryEventStore(EventStore):
    """Every event of the process, in memory, for Last-Event-ID resumption."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []
        self.ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(next(self.ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        found = [i for i, (eid, _, _) in enumerate(self.events) if eid == last_event_id]
        if not found:
            return None
        stream = self.events[found[0]][1]
        for eid, sid, message in self.events[found[0] + 1 :]:
            if sid == stream and message is not None:
                await send_callback(EventMessage(message, eid))
        return stream


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(NOTIFICATIONS))


async def serve_http(server: Server[Any], port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    bound = sock.getsockname()[1]

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host="127.0.0.1",
        event_store=MemoryEventStore(),
        retry_interval=1000,
    )
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    uv = uvicorn.Server(config)

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await uv.serve(sockets=[sock])
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        while not uv.started:
            if uv.should_exit:
                return
            await anyio.sleep(0.01)
        print(f"listening {bound}", flush=True)


def main() -> None:
    global with_task_tools
    args = sys.argv[1:]
    if "--tasks" in args:
        with_task_tools = True
        args.remove("--tasks")
    server = build()
    if not args:
        anyio.run(serve_stdio, server)
        return
    if len(args) != 2 or args[0] != "--http" or not args[1].isdigit() or int(args[1]) > 65535:
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    anyio.run(serve_http, server, int(args[1]))


if __name__ == "__main__":
    main()
