# The real Gemini CLI, pinned, run by `evalbox run` inside the sandbox against the stub model
# server (Gemini API with SSE) with network {allow: [127.0.0.1:<stub port>]} and nothing else:
# the verdict, the commands in the normalized transcript, usage, the native chat files, that the
# grader was unreadable, and that the API key appears in no result, state or output file; then
# the same through the run's model gateway (the key never in the sandbox, usage from the gateway).
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

KEY="gem-evalbox-e2e-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
start_stub --key "$KEY" --final "Created out.txt containing hello." \
  --command "echo hello > out.txt" --command "ls /grader"
mkdir -p "$WORK/s"
cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: gemini
fixtures: [hello]
candidates:
  - id: gemini
    adapter: gemini
    model: gemini-2.5-flash
    base_url: "http://127.0.0.1:$STUB_PORT"
    api_key_env: EVALBOX_E2E_KEY
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
YAML

R=$WORK/results
set +e
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/out" "$WORK/err" "$R"/runs/*/native/stderr.txt >&2; fail "evalbox run exited $rc"; }
python3 - "$R" "$STUB_LOG" <<'PY'
import glob, json, sys
R, stub_log = sys.argv[1:3]
[r] = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert r["verdict"] == "passed", (r["execution"], r["grading"])
assert r["usage"]["input_tokens"] == 30 and r["usage"]["output_tokens"] == 15, r["usage"]
assert r["usage"]["cost_usd"] is None, r["usage"]
run = f"{R}/runs/{r['run_id']}"
steps = [json.loads(l) for l in open(f"{run}/transcript.jsonl")]
steps = [s for s in steps if s.get("type") == "step"]
obs = {o["call_id"]: o for s in steps for o in s.get("observations", [])}
cmds = {c["command"]: obs[c["id"]] for s in steps for c in s.get("tool_calls", []) if c["tool"] == "shell"}
assert list(cmds) == ["echo hello > out.txt", "ls /grader"], cmds
assert "No such file" in cmds["ls /grader"]["output"], cmds
assert glob.glob(f"{run}/native/gemini-chats/*/*"), "no native chat file"
calls = [json.loads(l) for l in open(stub_log)]
calls = [e for e in calls if e["method"] == "POST"]
assert calls and all(e["key_ok"] for e in calls), calls
PY
if grep -rlF "$KEY" "$R" "$EVALBOX_STATE_DIR" "$WORK/out" "$WORK/err" 2>/dev/null; then fail "the API key leaked into the files above"; fi

# The same client through its run's model gateway (docs/agents.md): GOOGLE_GEMINI_BASE_URL is
# the gateway, GEMINI_API_KEY the placeholder (sent as x-goog-api-key); the stub gets the key.
cat >"$WORK/s/gateway.yaml" <<YAML
schema: evalbox.suite.v1
name: gemini-gateway
fixtures: [hello]
candidates:
  - id: gemini
    adapter: gemini
    model: gemini-2.5-flash
    gateway: {upstream: "http://127.0.0.1:$STUB_PORT", key_env: EVALBOX_E2E_KEY}
prices: {gemini-2.5-flash: {input_per_mtok: 0.3, output_per_mtok: 2.5}}
YAML
: >"$STUB_LOG"
R2=$WORK/results-gateway
set +e
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$WORK/s/gateway.yaml" --results "$R2" >"$WORK/out2" 2>"$WORK/err2"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/out2" "$WORK/err2" "$R2"/runs/*/native/stderr.txt >&2; fail "the gateway run exited $rc"; }
python3 - "$R2" "$STUB_LOG" <<'PY'
import json, sys
R, stub_log = sys.argv[1:3]
[r] = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert r["verdict"] == "passed", (r["execution"], r["grading"])
u = r["usage"]
assert (u["source"], u["input_tokens"], u["output_tokens"]) == ("gateway", 30, 15), u
assert abs(u["cost_usd"] - (30 * 0.3 + 15 * 2.5) / 1e6) < 1e-12, u
calls = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/model-calls.jsonl")]
assert len(calls) == 3 and all(c["api"] == "gemini" and c["response"]["status"] == 200 for c in calls), calls
assert all(c["request"]["headers"].get("x-goog-api-key") == "<redacted>" for c in calls), calls[0]["request"]["headers"]
posts = [json.loads(l) for l in open(stub_log) if '"POST"' in l]
assert len(posts) == 3 and all(p["key_ok"] for p in posts), posts
PY
if grep -rlF "$KEY" "$R2" "$EVALBOX_STATE_DIR" "$WORK/out2" "$WORK/err2" 2>/dev/null; then fail "the API key leaked into the files above"; fi
no_residue
echo "gemini: ok"
