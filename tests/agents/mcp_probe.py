#!/usr/bin/env python3
"""A stdio MCP server for evalbox's end-to-end tests: one tool, `lookup`, whose every call is
appended to the file $PROBE_LOG names (one JSON line: the tool, its arguments, $PROBE_TAG) and
answered with "PROBE-ANSWER <key> <$PROBE_TAG>".

Speaks newline-delimited JSON-RPC 2.0 on stdin/stdout (the MCP stdio transport): initialize,
ping, tools/list, tools/call; notifications are read and not answered.
"""
import json
import os
import sys

TOOL = {
    "name": "lookup",
    "description": "Looks a key up in the evalbox probe index.",
    "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}},
                    "required": ["key"]},
}


def answer(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def handle(msg):
    method, msg_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if msg_id is None:
        return  # a notification
    if method == "initialize":
        answer(msg_id, {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "evalbox-probe", "version": "1.0"}})
    elif method == "ping":
        answer(msg_id, {})
    elif method == "tools/list":
        answer(msg_id, {"tools": [TOOL]})
    elif method == "tools/call":
        args = params.get("arguments") or {}
        tag = os.environ.get("PROBE_TAG", "")
        with open(os.environ["PROBE_LOG"], "a") as f:
            f.write(json.dumps({"tool": params.get("name"), "arguments": args, "tag": tag}) + "\n")
        answer(msg_id, {"content": [{"type": "text",
                                     "text": f"PROBE-ANSWER {args.get('key', '')} {tag}"}]})
    else:
        answer(msg_id, error={"code": -32601, "message": f"no method {method}"})


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict):
            handle(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
