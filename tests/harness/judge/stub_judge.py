#!/usr/bin/env python3
"""A scripted judge for evalbox's judge tests, bound to 127.0.0.1 (or reading one request on
stdin, as a `command` judge).

Speaks the two non-streaming APIs evalbox's HTTP judges use:
  POST /v1/responses  OpenAI Responses API (Authorization: Bearer KEY)
  POST /v1/messages   Anthropic Messages API (x-api-key: KEY, anthropic-version)
A request with the wrong key gets HTTP 401. The request's `model` picks the behaviour:
  pass, fail      every proposition passes / fails
  smart           a proposition passes when the evidence (between the nonce markers) says
                  "off-by-one"; the verdict ignores anything the evidence asks for
  fenced          smart, in one ```json fenced block
  malformed       prose instead of JSON
  missing, extra  one entry too few / one id that was not asked for
  flaky           HTTP 500 on the first attempt of each request (same nonce), then smart
  down            always HTTP 500
  slow            answers after 5 s
  split           pass, fail, pass, ... in turn (votes)
Every request is logged as one JSON line to --log: path, model, whether the key arrived, the
nonce, and whether the agent's injection text ("ignore previous instructions") was inside the
evidence markers or outside them. The key itself is never written.

  stub_judge.py --port-file P --log L --key K
  stub_judge.py --stdin --log L        # a command judge: request JSON in, answer text out
"""
import argparse
import http.server
import json
import os
import re
import socketserver
import sys
import threading
import time

USAGE_IN, USAGE_OUT = 1000, 50
INJECTION = "ignore previous instructions"

p = argparse.ArgumentParser()
p.add_argument("--port-file")
p.add_argument("--log", required=True)
p.add_argument("--key", default="")
p.add_argument("--stdin", action="store_true")
ARGS = p.parse_args()
LOCK = threading.Lock()
SEEN = set()  # nonces already answered with a 500 (flaky)
COUNT = [0]   # requests answered (split)


def log(entry):
    with LOCK, open(ARGS.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


def analyse(system, user):
    """The nonce, the evidence between its markers, and where the injection text sits."""
    m = re.search(r'"<<<EVIDENCE ([0-9a-f]{32}) LABEL>>>"', system)
    nonce = m.group(1) if m else ""
    inside = ""
    outside = user
    if nonce:
        pattern = re.compile(r"<<<EVIDENCE %s [^>\n]*>>>\n(.*?)<<<END EVIDENCE %s>>>" %
                             (nonce, nonce), re.S)
        inside = "".join(pattern.findall(user))
        outside = pattern.sub("", user)
    ids = re.findall(r"^- (p\d+): ", user, re.M)
    return nonce, inside, outside, ids


def answer(model, ids, inside):
    if model == "malformed":
        return "I have looked at the evidence and everything passes."
    if model == "split":
        with LOCK:
            COUNT[0] += 1
            verdict = "pass" if COUNT[0] % 2 == 1 else "fail"
        return json.dumps({"checks": [{"id": i, "verdict": verdict, "reason": "in turn"}
                                      for i in ids]})
    if model in ("pass", "fail"):
        checks = [{"id": i, "verdict": model, "reason": "scripted " + model} for i in ids]
    else:
        ok = "off-by-one" in inside
        checks = [{"id": i, "verdict": "pass" if ok else "fail",
                   "reason": "the evidence names the off-by-one" if ok else
                   "the evidence does not name the cause"} for i in ids]
    if model == "missing":
        checks = checks[:-1]
    if model == "extra":
        checks.append({"id": "p99", "verdict": "pass", "reason": "not asked"})
    text = json.dumps({"checks": checks})
    if model == "fenced":
        text = "```json\n" + text + "\n```"
    return text


def judge(path, model, system, user, key_ok):
    nonce, inside, outside, ids = analyse(system, user)
    log({"path": path, "model": model, "key_ok": key_ok, "nonce": nonce, "ids": ids,
         "injection_inside": INJECTION in inside, "injection_outside": INJECTION in outside})
    return nonce, answer(model, ids, inside)


if ARGS.stdin:
    req = json.load(sys.stdin)
    _, text = judge("stdin", req.get("model", ""), req["system"], req["user"], True)
    sys.stdout.write(text)
    sys.exit(0)


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        openai = self.path == "/v1/responses"
        if openai:
            key_ok = self.headers.get("Authorization") == "Bearer " + ARGS.key
            system, user = body.get("instructions", ""), body.get("input", "")
        elif self.path == "/v1/messages":
            key_ok = (self.headers.get("x-api-key") == ARGS.key and
                      bool(self.headers.get("anthropic-version")))
            system, user = body.get("system", ""), body["messages"][0]["content"]
        else:
            return self.reply(404, {"error": "no such path"})
        if not key_ok:
            log({"path": self.path, "key_ok": False})
            return self.reply(401, {"error": "bad key"})
        model = body.get("model", "")
        if model == "down":
            log({"path": self.path, "model": model, "key_ok": True, "status": 500})
            return self.reply(500, {"error": "down"})
        if model == "flaky":
            nonce = analyse(system, user)[0]
            with LOCK:
                first = nonce not in SEEN
                SEEN.add(nonce)
            if first:
                log({"path": self.path, "model": model, "key_ok": True, "status": 500})
                return self.reply(500, {"error": "try again"})
        if model == "slow":
            time.sleep(5)
        _, text = judge(self.path, model, system, user, key_ok)
        if openai:
            return self.reply(200, {
                "output": [{"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": text}]}],
                "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}})
        return self.reply(200, {"content": [{"type": "text", "text": text}],
                                "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
with open(ARGS.port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
server.serve_forever()
