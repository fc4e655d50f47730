#!/usr/bin/env python3
"""A scripted model server for evalbox's end-to-end agent tests, bound to 127.0.0.1.

Speaks the two streaming APIs the real clients use:
  POST /v1/responses  OpenAI Responses API with SSE (Codex CLI, custom provider,
                      wire_api = "responses")
  POST /v1/messages   Anthropic Messages API with SSE (Claude Code, ANTHROPIC_BASE_URL)
  POST /v1beta/models/M:streamGenerateContent  Gemini API with SSE (Gemini CLI)

The script is stateless: a request that already carries k tool results is answered with the
k-th scripted shell command as a tool call, or with the final message once every command has
run. Requests without tools (a client's side queries) get a short plain answer. Every request
is logged as one JSON line to --log (path, whether the expected key arrived, how many tool
results it carried); the key itself is never written.

  stub_model.py --port-file P --log L --key K --command 'echo hi > out.txt' --final 'Done.'
  stub_model.py ... --fail-status 500     # every model request fails with that HTTP status
  stub_model.py ... --hang-after 1        # requests carrying 1 tool result are never answered
  stub_model.py ... --call 'mcp__probe__lookup={"key": "k"}'   # a step calling that tool
  stub_model.py ... --watch MARKER        # the log says which requests carried MARKER

--command and --call steps run in the order given. A --call step whose tool the request does
not offer is answered with the final message, and logged as "missing_tool".
"""
import argparse
import http.server
import json
import socketserver
import sys
import threading

USAGE_IN, USAGE_OUT = 10, 5


def tool_call(spec):
    name, _, arguments = spec.partition("=")
    return ("call", (name, json.loads(arguments or "{}")))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--port", type=int, default=0, help="listen here (default: a free port)")
    p.add_argument("--log", required=True)
    p.add_argument("--key", default="")
    p.add_argument("--command", action="append", dest="steps", default=[],
                   type=lambda c: ("shell", c))
    p.add_argument("--call", action="append", dest="steps", type=tool_call,
                   help="TOOL=JSON: a step that calls TOOL with that input")
    p.add_argument("--watch", action="append", default=[],
                   help="log which requests carry this text (a skill's words, a tool's answer)")
    p.add_argument("--final", default="Done.")
    p.add_argument("--fail-status", type=int, default=0)
    p.add_argument("--hang-after", type=int, default=-1,
                   help="model requests carrying this many tool results get no reply")
    return p.parse_args()


ARGS = parse_args()
LOCK = threading.Lock()
COUNTER = [0]


def next_id():
    with LOCK:
        COUNTER[0] += 1
        return COUNTER[0]


def log(entry):
    with LOCK, open(ARGS.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


def next_step(done, tool_names):
    """The scripted step after `done` tool results, or None once every step has run (or when
    the step's tool is not offered: logged, and answered with the final message)."""
    if done >= len(ARGS.steps):
        return None
    step = ARGS.steps[done]
    if step[0] == "call" and step[1][0] not in tool_names:
        log({"missing_tool": step[1][0], "offered": sorted(n for n in tool_names if n)})
        return None
    return step


def sse(handler, events):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        handler.wfile.flush()
    handler.close_connection = True


# --- OpenAI Responses (Codex) ----------------------------------------------------------------

def responses_tool_results(body):
    return sum(1 for it in body.get("input", []) or []
               if isinstance(it, dict) and it.get("type") in
               ("function_call_output", "custom_tool_call_output"))


def responses_shell_call(body, command, n):
    names = {t.get("name") for t in body.get("tools", []) or [] if isinstance(t, dict)}
    if "exec_command" in names or "shell" not in names:
        name, arguments = "exec_command", {"cmd": command}
    else:
        name, arguments = "shell", {"command": ["bash", "-lc", command]}
    return {"type": "function_call", "id": f"fc_{n:04d}", "call_id": f"call_{n:04d}",
            "name": name, "arguments": json.dumps(arguments), "status": "completed"}


def responses_tool_names(body):
    names = set()
    for t in body.get("tools", []) or []:
        if isinstance(t, dict):
            # A tool without a name (web_search, tool_search) by its type.
            names.add(t.get("name") or t.get("type"))
            # Codex offers MCP tools in namespaces of their own.
            for inner in t.get("tools", []) or []:
                if isinstance(inner, dict):
                    names.add(inner.get("name"))
    return names


def responses_searched_tools(body):
    """{name as scripted: (namespace, name)} of the tools Codex's tool_search loaded — the
    tool_search_output items of the input. A namespace's tool is scripted as NAMESPACE__NAME
    (mcp__probe__lookup: the namespace mcp__probe, the tool lookup) and called by both."""
    out = {}
    for it in body.get("input", []) or []:
        if not (isinstance(it, dict) and it.get("type") == "tool_search_output"):
            continue
        for t in it.get("tools", []) or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                for inner in t.get("tools", []) or []:
                    if isinstance(inner, dict) and inner.get("name"):
                        out[f"{t.get('name')}__{inner['name']}"] = (t.get("name"), inner["name"])
            elif t.get("name"):
                out[t["name"]] = (None, t["name"])
    return out


def responses_reply(handler, body):
    n = next_id()
    done = responses_tool_results(body)
    searched = responses_searched_tools(body)
    names = responses_tool_names(body) | set(searched)
    pending = ARGS.steps[done] if done < len(ARGS.steps) else None
    searched_before = any(isinstance(it, dict) and it.get("type") == "tool_search_output"
                          for it in body.get("input", []) or [])
    search = (body.get("tools") and pending and pending[0] == "call"
              and pending[1][0] not in names and "tool_search" in names and not searched_before)
    step = None if search else next_step(done, names)
    if search:
        # A tool Codex defers (an MCP server's): searched for first, as a model would.
        query = " ".join(w for w in pending[1][0].split("_") if w)
        item = {"type": "tool_search_call", "id": f"ts_{n:04d}", "call_id": f"call_{n:04d}",
                "execution": "client", "status": "completed",
                "arguments": {"query": query, "limit": 8}}
    elif body.get("tools") and step and step[0] == "shell":
        item = responses_shell_call(body, step[1], n)
    elif body.get("tools") and step:
        name, arguments = step[1]
        namespace, name = searched.get(name, (None, name))
        item = {"type": "function_call", "id": f"fc_{n:04d}", "call_id": f"call_{n:04d}",
                "name": name, "arguments": json.dumps(arguments), "status": "completed"}
        if namespace:
            item["namespace"] = namespace
    else:
        text = ARGS.final if body.get("tools") else "ok"
        item = {"type": "message", "id": f"msg_{n:04d}", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    resp = {"id": f"resp_{n:04d}", "object": "response", "status": "in_progress",
            "model": body.get("model", "stub"), "output": []}
    added = dict(item)
    if item["type"] == "message":
        added = dict(item, content=[], status="in_progress")
    events = [("response.created", {"type": "response.created", "response": resp}),
              ("response.output_item.added",
               {"type": "response.output_item.added", "output_index": 0, "item": added})]
    if item["type"] == "message":
        events.append(("response.output_text.delta",
                       {"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": 0, "content_index": 0,
                        "delta": item["content"][0]["text"]}))
    events.append(("response.output_item.done",
                   {"type": "response.output_item.done", "output_index": 0, "item": item}))
    usage = {"input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": USAGE_IN + USAGE_OUT}
    events.append(("response.completed",
                   {"type": "response.completed",
                    "response": dict(resp, status="completed", output=[item], usage=usage)}))
    sse(handler, events)


# --- Anthropic Messages (Claude Code) --------------------------------------------------------

def messages_tool_results(body):
    n = 0
    for m in body.get("messages", []) or []:
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            n += sum(1 for b in m["content"]
                     if isinstance(b, dict) and b.get("type") == "tool_result")
    return n


def messages_reply(handler, body):
    n = next_id()
    names = {t.get("name") for t in body.get("tools", []) or [] if isinstance(t, dict)}
    step = next_step(messages_tool_results(body), names) if "Bash" in names else None
    if step and step[0] == "shell":
        block = {"type": "tool_use", "id": f"toolu_stub{n:06d}", "name": "Bash",
                 "input": {"command": step[1], "description": "scripted command"}}
        stop = "tool_use"
    elif step:
        block = {"type": "tool_use", "id": f"toolu_stub{n:06d}", "name": step[1][0],
                 "input": step[1][1]}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ARGS.final if names else "ok"}
        stop = "end_turn"
    msg = {"id": f"msg_stub{n:06d}", "type": "message", "role": "assistant",
           "model": body.get("model", "stub"), "content": [], "stop_reason": None,
           "stop_sequence": None,
           "usage": {"input_tokens": USAGE_IN, "output_tokens": 1,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
    if not body.get("stream"):
        full = dict(msg, content=[block], stop_reason=stop,
                    usage=dict(msg["usage"], output_tokens=USAGE_OUT))
        data = json.dumps(full).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return
    events = [("message_start", {"type": "message_start", "message": msg})]
    if block["type"] == "tool_use":
        events += [("content_block_start",
                    {"type": "content_block_start", "index": 0,
                     "content_block": dict(block, input={})}),
                   ("content_block_delta",
                    {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "input_json_delta",
                               "partial_json": json.dumps(block["input"])}})]
    else:
        events += [("content_block_start",
                    {"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}}),
                   ("content_block_delta",
                    {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": block["text"]}})]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": USAGE_OUT}}),
               ("message_stop", {"type": "message_stop"})]
    sse(handler, events)


# --- Gemini generateContent (Gemini CLI) -----------------------------------------------------

def gemini_tool_results(body):
    n = 0
    for c in body.get("contents", []) or []:
        if isinstance(c, dict):
            n += sum(1 for p in c.get("parts", []) or []
                     if isinstance(p, dict) and "functionResponse" in p)
    return n


def gemini_tool_names(body):
    names = set()
    for t in body.get("tools", []) or []:
        if isinstance(t, dict):
            for f in t.get("functionDeclarations", []) or []:
                if isinstance(f, dict):
                    names.add(f.get("name"))
    return names


def gemini_reply(handler, body, stream):
    names = gemini_tool_names(body)
    step = (next_step(gemini_tool_results(body), names)
            if "run_shell_command" in names else None)
    if step and step[0] == "shell":
        part = {"functionCall": {"name": "run_shell_command",
                                 "args": {"command": step[1],
                                          "description": "scripted command"}}}
    elif step:
        part = {"functionCall": {"name": step[1][0], "args": step[1][1]}}
    else:
        part = {"text": ARGS.final if names else "ok"}
    chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": USAGE_IN, "candidatesTokenCount": USAGE_OUT,
                               "totalTokenCount": USAGE_IN + USAGE_OUT},
             "modelVersion": "stub", "responseId": f"gem_{next_id():04d}"}
    if not stream:
        handler.reply_json(200, chunk)
        return
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
    handler.wfile.flush()
    handler.close_connection = True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    def key_seen(self):
        auth = self.headers.get("Authorization", "")
        xkey = self.headers.get("x-api-key", "") or self.headers.get("x-goog-api-key", "")
        return bool(ARGS.key) and (auth == f"Bearer {ARGS.key}" or xkey == ARGS.key)

    def reply_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"method": "GET", "path": self.path, "key_ok": self.key_seen()})
        self.reply_json(404, {"error": {"type": "not_found", "message": "stub: no such path"}})

    def do_HEAD(self):
        log({"method": "HEAD", "path": self.path})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        entry = {"method": "POST", "path": path, "key_ok": self.key_seen(),
                 "tools": len(body.get("tools", []) or []) if isinstance(body, dict) else 0}
        gemini = ":generateContent" in path or ":streamGenerateContent" in path
        if isinstance(body, dict) and gemini:
            entry["tool_results"] = gemini_tool_results(body)
            entry["tools"] = len(gemini_tool_names(body))
        elif isinstance(body, dict) and path.endswith("/responses"):
            entry["tool_results"] = responses_tool_results(body)
        elif isinstance(body, dict) and path.endswith("/messages"):
            entry["tool_results"] = messages_tool_results(body)
        if ARGS.watch:
            text = raw.decode("utf-8", "replace")
            entry["watched"] = [w for w in ARGS.watch if w in text]
        model_call = path.endswith("/responses") or path.endswith("/messages") or gemini
        if model_call and ARGS.fail_status:
            entry["status"] = ARGS.fail_status
            log(entry)
            kind = "api_error" if path.endswith("/messages") else "server_error"
            self.reply_json(ARGS.fail_status,
                            {"type": "error", "error": {"type": kind,
                                                        "message": "stub: scripted failure"}})
            return
        log(entry)
        if model_call and entry.get("tool_results") == ARGS.hang_after:
            threading.Event().wait()  # never answers: the client is killed by its wall limit
        if gemini:
            gemini_reply(self, body, ":streamGenerateContent" in path)
        elif path.endswith("/responses"):
            responses_reply(self, body)
        elif path.endswith("/messages"):
            messages_reply(self, body)
        else:
            self.reply_json(404, {"error": {"type": "not_found", "message": "stub: no such path"}})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    server = Server(("127.0.0.1", ARGS.port), Handler)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
