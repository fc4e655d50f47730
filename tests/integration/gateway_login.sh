# A subscription login behind the model gateway, with a command agent that calls the model
# through its gateway and a stub that is both the model API and the login's token endpoint:
#   - the login (Claude OAuth credentials, expired) is refreshed on the host at the first
#     request; the upstream sees only the fresh access token, with Anthropic's OAuth flag;
#   - the rotation is kept: the next run uses the new token from the lease, without a refresh,
#     and the host's source file is never written;
#   - no token (access or refresh) is anywhere the agent can look: its environment, the home,
#     the workspace, /proc, /tmp — nor in results, records or logs;
#   - validate says which login the gateway serves; a JSON credential that is no login it
#     knows is refused with the file and the line.
source "$(dirname "$0")/lib.sh"
need_isolation
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG=$WORK/stub.jsonl
# The stub: /oauth/token hands out access-N / refresh-N (N = 2, 3, ...) for the refresh token
# it issued last; /v1/messages answers only the newest access token.
cat >"$WORK/stub.py" <<'PY'
import http.server, json, sys, threading
port, log = int(sys.argv[1]), sys.argv[2]
state = {"n": 1, "refresh": "refresh-1", "access": "access-1"}
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        with lock:
            with open(log, "a") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body}) + "\n")
            if self.path == "/oauth/token":
                req = json.loads(body)
                if req.get("refresh_token") != state["refresh"]:
                    return self.answer(400, {"error": "invalid_grant"})
                state["n"] += 1
                state["access"], state["refresh"] = "access-%d" % state["n"], "refresh-%d" % state["n"]
                return self.answer(200, {"access_token": state["access"], "refresh_token": state["refresh"], "expires_in": 3600})
            if self.headers.get("Authorization") != "Bearer " + state["access"]:
                return self.answer(401, {"type": "error", "error": {"type": "authentication_error", "message": "bad token"}})
        self.answer(200, {"type": "message", "model": "claude-stub", "content": [{"type": "text", "text": "ok"}],
                          "usage": {"input_tokens": 11, "output_tokens": 3}})
    def answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
python3 "$WORK/stub.py" "$PORT" "$LOG" >"$WORK/stub.out" 2>&1 &
STUB_PID=$!
trap 'kill $STUB_PID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && break; sleep 0.1; done

S=$WORK/s
mkdir -p "$S/agents" "$S/logins"
NOW_MS=$(python3 -c 'import time; print(int(time.time() * 1000))')
cat >"$S/logins/claude.json" <<JSON
{"claudeAiOauth": {"accessToken": "access-1", "refreshToken": "refresh-1",
 "expiresAt": $((NOW_MS - 1000)), "scopes": ["user:inference"], "subscriptionType": "max"}}
JSON
chmod 600 "$S/logins/claude.json"
cp "$S/logins/claude.json" "$WORK/claude.json.orig"
for f in f1 f2; do
  mkdir -p "$S/$f/workspace"
  cat >"$S/$f/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: $f
prompt: Ask the model, then write out.txt.
checks:
  - {id: out, file: {path: out.txt, equals: "done\n"}}
  - {id: no-token, file: {path: found.txt, equals: "nothing\n"}}
YAML
done
# The agent asks once with its placeholder, then looks for any token wherever it can read.
cat >"$S/agents/ask.sh" <<'SH'
#!/bin/sh
set -u
python3 - <<'PY' || exit 3
import json, os, urllib.request
req = urllib.request.Request(os.environ["EVALBOX_GATEWAY_URL"] + "/v1/messages",
    data=json.dumps({"model": "claude-stub", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"x-api-key": os.environ["EVALBOX_GATEWAY_KEY"], "content-type": "application/json",
             "anthropic-beta": "tools-2025-01-01"})
with urllib.request.urlopen(req, timeout=30) as r:
    assert r.status == 200, r.status
PY
found=$( (env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\0' '\n';
          grep -rsI -e 'access-[0-9]' -e 'refresh-[0-9]' "$HOME" /workspace /tmp /run 2>/dev/null) |
        grep -c -e 'access-[0-9]' -e 'refresh-[0-9]')
[ "$found" = 0 ] && echo nothing > found.txt || echo "found $found" > found.txt
echo done > out.txt
SH
chmod +x "$S/agents/ask.sh"
cat >"$S/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: gateway-login
fixtures: [f1, f2]
concurrency: 1
credentials: {claude-login: logins/claude.json}
candidates:
  - id: login
    adapter: command
    argv: [agents/ask.sh]
    credential: claude-login
    gateway: {upstream: "http://127.0.0.1:$PORT", token_url: "http://127.0.0.1:$PORT/oauth/token"}
YAML

expect_exit 0 "validate" "$WORK/out" "$WORK/err" "$EVALBOX" validate "$S/suite.yaml"
grep -q "^note candidate login: model gateway to http://127.0.0.1:$PORT, authenticated by the claude-oauth login in credential 'claude-login'" "$WORK/out" ||
  fail "validate does not say the gateway serves the login: $(cat "$WORK/out")"

R=$WORK/r
expect_exit 0 "two runs on a login" "$WORK/out" "$WORK/err" "$EVALBOX" run "$S/suite.yaml" --results "$R"
python3 - "$R" "$LOG" <<'PY'
import json, sys
R, log = sys.argv[1:3]
runs = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert len(runs) == 2, len(runs)
for r in runs:
    assert r["verdict"] == "passed", (r["fixture"], r["checks"])
    assert r["usage"]["source"] == "gateway" and r["usage"]["input_tokens"] == 11, r["usage"]
calls = [json.loads(l) for l in open(log)]
refreshes = [c for c in calls if c["path"] == "/oauth/token"]
api = [c for c in calls if c["path"] != "/oauth/token"]
# One refresh, by the first run, with the refresh token of the file and Claude Code's client.
assert len(refreshes) == 1, refreshes
body = json.loads(refreshes[0]["body"])
assert body["refresh_token"] == "refresh-1" and body["grant_type"] == "refresh_token", body
assert len(api) == 2, api
for c in api:
    h = {k.lower(): v for k, v in c["headers"].items()}
    assert h["authorization"] == "Bearer access-2", h
    assert h["anthropic-beta"] == "tools-2025-01-01,oauth-2025-04-20", h
    assert "x-api-key" not in h, h
PY
# The lease holds the rotation; the host's source is as it was.
LEASE=$(ls "$EVALBOX_STATE_DIR"/credential-leases/claude-login-* | head -1)
python3 - "$LEASE" <<'PY' || fail "the lease does not hold the rotated tokens"
import json, sys
t = json.load(open(sys.argv[1]))["claudeAiOauth"]
assert (t["accessToken"], t["refreshToken"], t["subscriptionType"]) == ("access-2", "refresh-2", "max"), t
PY
cmp -s "$S/logins/claude.json" "$WORK/claude.json.orig" || fail "the host's login file was written"
# No token in anything evalbox wrote.
if grep -rIl -e 'access-[0-9]' -e 'refresh-[0-9]' "$R" "$WORK/out" "$WORK/err"; then
  fail "a token was written into the results or the output"
fi
no_residue

# A JSON credential that is no login the gateway knows: refused with the file and line.
echo '{"api_key": "k"}' >"$S/logins/other.json"
chmod 600 "$S/logins/other.json"
sed -e 's|logins/claude.json|logins/other.json|' "$S/suite.yaml" >"$S/other.yaml"
expect_exit 64 "validate an unknown login" "$WORK/out" "$WORK/err" "$EVALBOX" validate "$S/other.yaml"
grep -q "other.yaml:[0-9]*:[0-9]*: candidate login: credential 'claude-login' .* is neither an API key on one line nor a login the gateway can use" "$WORK/err" ||
  fail "validate does not refuse the unknown login: $(cat "$WORK/err")"
echo "PASS: gateway_login"
