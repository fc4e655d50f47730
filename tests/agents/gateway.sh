# The model gateway with the real clients (docs/agents.md, "The model gateway"): Codex CLI and
# Claude Code run unchanged inside the sandbox against the stub model through their runs'
# gateways, streaming included, and
#   - the real key reaches the stub (in the place each client put its placeholder), while the
#     sandbox sees only the placeholder: the key is nowhere in the transcripts (whose scripted
#     commands print the agent's environment and look for the key file), the results, the
#     state directory or evalbox's own output;
#   - the agent cannot reach the stub around its gateway (the stub's port is not relayed);
#   - usage and cost in run.json are the stub's totals, exactly, and every call is recorded
#     in model-calls.jsonl with its credential headers redacted;
#   - after its run the gateway is gone: its placeholder opens nothing;
#   - a budget of one request ends each client cleanly on the refusal (no kill), the run's
#     outcome budget_exhausted, graded as the agent left the workspace (failed);
#   - the first run recorded into a model cache: replayed with the stub gone, each client does
#     the same commands again, with the same verdict and usage, and spends nothing.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

KEY="sk-evalbox-gw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
mkdir -p "$WORK/creds" "$WORK/s"
printf '%s\n' "$KEY" >"$WORK/creds/anthropic-key"
chmod 600 "$WORK/creds/anthropic-key"

# The stub's port is chosen first: a scripted command tries to reach it directly.
STUB_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_stub --port "$STUB_PORT" --key "$KEY" --final "Created out.txt containing hello." \
  --command "env | sort; cat /proc/1/environ 2>&1 | tr '\\0' '\\n'; ls -a ~ 2>&1" \
  --command "cat $WORK/creds/anthropic-key 2>&1; (exec 3<>/dev/tcp/127.0.0.1/$STUB_PORT) 2>/dev/null && echo DIRECT-\"\"REACHED || echo DIRECT-\"\"REFUSED" \
  --command "echo hello > out.txt"

cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
write_suite() {  # write_suite NAME [BUDGET-LINE]
  cat >"$WORK/s/$1.yaml" <<YAML
schema: evalbox.suite.v1
name: $1
fixtures: [hello]
credentials: {anthropic-key: $WORK/creds/anthropic-key}
candidates:
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {wire_api: responses}
    gateway: {upstream: "http://127.0.0.1:$STUB_PORT/v1", key_env: EVALBOX_E2E_KEY}
  - id: claude
    adapter: claude-code
    model: claude-sonnet-4-5
    credential: anthropic-key
    permission_mode: bypass
    gateway: {upstream: "http://127.0.0.1:$STUB_PORT"}
prices:
  gpt-5.5: {input_per_mtok: 1.25, output_per_mtok: 10}
  claude-sonnet-4-5: {input_per_mtok: 3, output_per_mtok: 15}
  stub: {input_per_mtok: 3, output_per_mtok: 15}
concurrency: 2
${2:-}
YAML
}
write_suite gateway

R=$WORK/results
set +e
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$WORK/s/gateway.yaml" --results "$R" \
  --model-cache "$WORK/cache" --model-cache-mode record >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 0 ] || {
  cat "$WORK/out" "$WORK/err" >&2
  for f in "$R"/runs/*/native/stderr.txt; do echo "== $f" >&2; tail -20 "$f" >&2; done
  fail "evalbox run through the gateway exited $rc"
}

python3 - "$R" "$STUB_LOG" <<'PY'
import glob, json, sys
R, stub_log = sys.argv[1:3]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
assert set(rows) == {"codex", "claude"}, rows.keys()
log = [json.loads(l) for l in open(stub_log)]
# Every request reached the stub with the real key, put where the client put its placeholder.
assert log and all(e.get("key_ok") for e in log if e["method"] == "POST"), log
price = {"codex": (1.25, 10), "claude": (3, 15)}
for cid, r in rows.items():
    assert r["execution"]["status"] == "completed", (cid, r["execution"])
    assert r["verdict"] == "passed", (cid, r["grading"])
    run = f"{R}/runs/{r['run_id']}"
    calls = [json.loads(l) for l in open(f"{run}/model-calls.jsonl")]
    suffix = "/responses" if cid == "codex" else "/messages"
    stub_calls = [e for e in log if e["method"] == "POST" and e["path"].endswith(suffix)]
    mine = [c for c in calls if c["path"].split("?")[0].endswith(suffix)]
    assert len(mine) == len(stub_calls) >= 4, (cid, len(mine), len(stub_calls))
    # Usage and cost are the stub's: 10 input and 5 output tokens a call, exactly.
    u = r["usage"]
    assert u["source"] == "gateway", (cid, u)
    assert u["input_tokens"] == 10 * len(calls) and u["output_tokens"] == 5 * len(calls), (cid, u, len(calls))
    pin, pout = price[cid]
    assert abs(u["cost_usd"] - len(calls) * (10 * pin + 5 * pout) / 1e6) < 1e-12, (cid, u)
    assert u["cost_source"] == "gateway", (cid, u)
    g = r["gateway"]
    assert g["totals"]["calls"] == len(calls) and g["totals"]["refused"] == 0, (cid, g)
    assert g["latency"]["ttfb_ms_p50"] is not None, (cid, g)
    for c in calls:
        assert c["response"]["status"] == 200, (cid, c["response"].get("status"))
        assert c["response"]["stream"] is True, (cid, c["path"])   # SSE, passed through
        assert c["response"]["events"], (cid, c["path"])
        h = c["request"]["headers"]
        for k in ("authorization", "x-api-key"):
            if k in h:
                assert h[k] == "<redacted>", (cid, k, h[k])
        assert c["usage"]["input_tokens"] == 10 and c["usage"]["output_tokens"] == 5, (cid, c["usage"])
    # Inside, the agent saw a placeholder and its gateway, never the key or the stub.
    out = open(f"{run}/transcript.jsonl").read()
    assert "evalbox-gateway-" in out, (cid, "no placeholder in the agent's environment")
    assert "DIRECT-REFUSED" in out and "DIRECT-REACHED" not in out, (cid, "the stub was reachable around the gateway")
    assert "No such file" in out, (cid, "the key file was visible inside")
PY

# The key is nowhere: not in results (transcripts, records, model calls), not in the state
# directory, not in evalbox's output.
if grep -rlF "$KEY" "$R" "$EVALBOX_STATE_DIR" "$WORK/out" "$WORK/err" 2>/dev/null; then
  fail "the API key leaked into the files above"
fi

# A run's placeholder opens nothing after it: its gateway is gone.
port=$(python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
print(r["gateway"]["url"].rsplit(":", 1)[1].split("/")[0])' "$R/results.jsonl")
if python3 - "$port" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
sys.exit(0)
PY
then fail "the gateway of a finished run still listens on port $port"; fi

# A budget of one request: the first call runs the environment listing, the second is refused
# in the API's own shape; each client stops on it by itself, and the run is budget_exhausted.
write_suite budget "budget: {requests: 1}"
R2=$WORK/results-budget
set +e
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$WORK/s/budget.yaml" --results "$R2" >"$WORK/out2" 2>"$WORK/err2"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$WORK/out2" "$WORK/err2" >&2; fail "a spent budget: evalbox run exited $rc, expected 1 (task failures)"; }
python3 - "$R2" <<'PY'
import json, sys
R = sys.argv[1]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
for cid, r in rows.items():
    e = r["execution"]
    assert e["status"] == "completed" and e["outcome"] == "budget_exhausted", (cid, e)
    assert "requests: 1 of 1" in e["budget_exhausted"], (cid, e)
    # The client stopped on the refusal by itself: not killed.
    assert e["records"]["agent"]["outcome"] == "exited", (cid, e["records"]["agent"])
    assert r["verdict"] == "failed", (cid, r["verdict"])
    g = r["gateway"]
    assert g["totals"]["calls"] == 1 and g["totals"]["refused"] >= 1, (cid, g)
    assert r["usage"]["input_tokens"] == 10, (cid, r["usage"])
    calls = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/model-calls.jsonl")]
    refused = [c for c in calls if c.get("refused") == "budget_exhausted"]
    assert refused and refused[0]["response"]["status"] == 400, (cid, calls[-1])
PY
if grep -rlF "$KEY" "$R2" "$EVALBOX_STATE_DIR" "$WORK/out2" "$WORK/err2" 2>/dev/null; then
  fail "the API key leaked into the files above"
fi

# Replay: the stub is gone; every answer comes from the cache the first run recorded.
stop_stub
R3=$WORK/results-replay
set +e
"$EVALBOX" run "$WORK/s/gateway.yaml" --results "$R3" --model-cache "$WORK/cache" \
  --model-cache-mode replay >"$WORK/out3" 2>"$WORK/err3"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/out3" "$WORK/err3" >&2; fail "the replay exited $rc"; }
python3 - "$R" "$R3" <<'PY'
import json, sys
def runs(R):
    return {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
def commands(R, r):
    steps = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/transcript.jsonl")]
    return [c.get("command") for s in steps if s.get("type") == "step" for c in s.get("tool_calls", [])]
a, b = runs(sys.argv[1]), runs(sys.argv[2])
for cid in ("codex", "claude"):
    ra, rb = a[cid], b[cid]
    assert rb["verdict"] == ra["verdict"] == "passed", (cid, rb["verdict"])
    assert commands(sys.argv[1], ra) == commands(sys.argv[2], rb), (cid, commands(sys.argv[2], rb))
    ua, ub = ra["usage"], rb["usage"]
    assert (ub["input_tokens"], ub["output_tokens"]) == (ua["input_tokens"], ua["output_tokens"]), (cid, ua, ub)
    t = rb["gateway"]["totals"]
    assert t["replayed"] == t["calls"] > 0 and t["replay_misses"] == 0, (cid, t)
    assert ub["cost_usd"] == 0, (cid, ub)   # nothing was spent
    calls = [json.loads(l) for l in open(f"{sys.argv[2]}/runs/{rb['run_id']}/model-calls.jsonl")]
    matches = [c.get("replay_match") for c in calls]
    # The first request matches exactly; later ones carry command output that differs from
    # run to run (the placeholder, Codex's wall times) and match by position and shape.
    assert matches[0] == "exact" and set(matches) <= {"exact", "position"}, (cid, matches)
PY
no_residue
echo "gateway: ok"
