# The model gateway's budgets and its hostile side, with a command agent that calls the model
# itself (EVALBOX_GATEWAY_URL / EVALBOX_GATEWAY_KEY, docs/agents.md) and the stub model as the
# upstream:
#   - a per-run budget of 2 requests: the third is refused in the API's shape, the agent stops
#     on it, the run's outcome is budget_exhausted (graded, failed), its usage the stub's;
#   - an agent that ignores the refusals and keeps asking is ended by evalbox;
#   - a forged key, no key, a path outside the upstream's: refused, never forwarded; the stub
#     itself is not reachable around the gateway; the key is in no file;
#   - a suite_budget stops scheduling once spent (exit 4, the rest not started), counts what the
#     results already hold on a resume, and a larger one resumes the rest;
#   - a credential's requests_per_minute holds a request back until the run ends.
source "$(dirname "$0")/lib.sh"
need_isolation
STUB_LOG=$WORK/stub.log
STUB_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
KEY="sk-evalbox-budget-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
python3 "$SRC/tests/agents/stub_model.py" --port "$STUB_PORT" --port-file "$WORK/stub.port" \
  --log "$STUB_LOG" --key "$KEY" >"$WORK/stub.out" 2>&1 &
STUB_PID=$!
trap 'kill $STUB_PID 2>/dev/null; cleanup' EXIT
for _ in $(seq 100); do [ -s "$WORK/stub.port" ] && break; sleep 0.1; done
[ -s "$WORK/stub.port" ] || fail "the stub model did not start"

S=$WORK/s
mkdir -p "$S/agents"
for f in f1 f2 f3 f4; do
  mkdir -p "$S/$f/workspace"
  cat >"$S/$f/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: $f
prompt: Ask the model, then write out.txt.
checks:
  - {id: out, file: {path: out.txt, equals: "done\n"}}
YAML
done
# The agent: CALLS model requests through its gateway (each printed as "status N"), then
# out.txt; a refused request ends it with exit 3 unless IGNORE=1 (then it keeps asking); with
# HOSTILE=1 it first tries what a hostile agent would.
cat >"$S/agents/call-model.py" <<'PY'
#!/usr/bin/env python3
import json, os, socket, sys, urllib.request, urllib.error
url = os.environ["EVALBOX_GATEWAY_URL"]
key = os.environ["EVALBOX_GATEWAY_KEY"]
def ask(path, headers):
    req = urllib.request.Request(url + path, data=json.dumps({"model": "gpt-stub", "input": "hi"}).encode(),
                                 headers=dict({"Content-Type": "application/json"}, **headers))
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            return r.status, ""
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
if os.environ.get("HOSTILE"):
    print("forged", ask("/responses", {"Authorization": "Bearer sk-forged"})[0])
    print("nokey", ask("/responses", {})[0])
    print("outside", ask("/../admin", {"Authorization": "Bearer " + key})[0])
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", int(os.environ["STUB_PORT"])))
        print("direct", "reached")
    except OSError:
        print("direct", "refused")
    print("env-has-key", os.environ.get("REAL_KEY_CANARY", "") != "" )
n = int(os.environ.get("CALLS", "3"))
i = 0
while i < n or os.environ.get("IGNORE"):
    status, body = ask("/responses", {"Authorization": "Bearer " + key})
    print("status", status, flush=True)
    if status != 200 and not os.environ.get("IGNORE"):
        print(body, file=sys.stderr)
        sys.exit(3)
    i += 1
open("out.txt", "w").write("done\n")
PY
chmod +x "$S/agents/call-model.py"
write_suite() {  # write_suite FILE EXTRA-YAML
  cat >"$S/$1" <<YAML
schema: evalbox.suite.v1
name: gateway-budget
fixtures: [f1, f2, f3, f4]
candidates:
  - id: asks
    adapter: command
    argv: [agents/call-model.py]
    env: {STUB_PORT: "$STUB_PORT"}
    gateway: {upstream: "http://127.0.0.1:$STUB_PORT/v1", key_env: GW_KEY}
prices: {asks: {input_per_mtok: 1000, output_per_mtok: 2000}}  # by candidate id
$2
YAML
}

# validate says what the gateway will do, and refuses a gateway whose key cannot be read.
write_suite v.yaml "budget: {requests: 2}
suite_budget: {cost: 5}"
expect_exit 0 "validate" "$WORK/out" "$WORK/err" env GW_KEY="$KEY" "$EVALBOX" validate "$S/v.yaml"
grep -q "^note candidate asks: model gateway to http://127.0.0.1:$STUB_PORT/v1, budget per run {\"requests\":2}" "$WORK/out" ||
  fail "validate does not note the gateway: $(cat "$WORK/out")"
grep -q "^note suite budget {\"cost\":5.0}" "$WORK/out" || fail "validate does not note the suite budget: $(cat "$WORK/out")"
expect_exit 64 "validate without the key" "$WORK/out" "$WORK/err" env -u GW_KEY "$EVALBOX" validate "$S/v.yaml"
grep -q "v.yaml:[0-9]*:[0-9]*: candidate asks: gateway.key_env GW_KEY is not set" "$WORK/err" ||
  fail "validate does not say the key is missing: $(cat "$WORK/err")"

# A budget of 2 requests per run, a hostile agent on one fixture.
write_suite per-run.yaml "budget: {requests: 2}"
sed -i 's|    env: {STUB_PORT: "'"$STUB_PORT"'"}|    env: {STUB_PORT: "'"$STUB_PORT"'", HOSTILE: "1"}|' "$S/per-run.yaml"
R=$WORK/per-run
expect_exit 1 "a run over its budget" "$WORK/out" "$WORK/err" \
  env GW_KEY="$KEY" "$EVALBOX" run "$S/per-run.yaml" --results "$R" --filter 'f1/*'
python3 - "$R" "$STUB_LOG" <<'PY'
import json, sys
R, stub = sys.argv[1:3]
[r] = [json.loads(l) for l in open(f"{R}/results.jsonl")]
e = r["execution"]
assert e["status"] == "completed" and e["outcome"] == "budget_exhausted", e
assert e["budget_exhausted"] == "requests: 2 of 2", e
assert e["records"]["agent"]["outcome"] == "exited" and e["records"]["agent"]["exit_code"] == 3, e["records"]["agent"]
assert r["verdict"] == "failed", r["verdict"]
u = r["usage"]
assert (u["input_tokens"], u["output_tokens"], u["source"]) == (20, 10, "gateway"), u
assert abs(u["cost_usd"] - (20 * 1000 + 10 * 2000) / 1e6) < 1e-12, u
out = open(f"{R}/runs/{r['run_id']}/native/stdout.txt").read()
for line in ("forged 401", "nokey 401", "outside 404", "direct refused", "status 200", "status 400"):
    assert line in out, (line, out)
calls = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/model-calls.jsonl")]
# Recorded as each call ends, which need not be the order the agent made them in.
want = ["invalid_api_key", "invalid_api_key", "not_found", None, None, "budget_exhausted"]
assert sorted(map(str, (c.get("refused") for c in calls))) == sorted(map(str, want)), [(c["path"], c.get("refused")) for c in calls]
posts = [json.loads(l) for l in open(stub)]
assert len(posts) == 2 and all(p["key_ok"] for p in posts), posts
PY

# An agent that ignores the refusals is ended by evalbox (after 3 of them).
write_suite ignore.yaml "budget: {requests: 1}"
sed -i 's|    env: {STUB_PORT: "'"$STUB_PORT"'"}|    env: {STUB_PORT: "'"$STUB_PORT"'", IGNORE: "1"}|' "$S/ignore.yaml"
R=$WORK/ignore
expect_exit 1 "an agent that ignores its budget" "$WORK/out" "$WORK/err" \
  env GW_KEY="$KEY" "$EVALBOX" run "$S/ignore.yaml" --results "$R" --filter 'f1/*'
python3 - "$R" <<'PY'
import json, sys
[r] = [json.loads(l) for l in open(f"{sys.argv[1]}/results.jsonl")]
e = r["execution"]
assert e["status"] == "completed" and e["outcome"] == "budget_exhausted", e
assert e["records"]["agent"]["outcome"] == "cancelled", e["records"]["agent"]
assert r["gateway"]["totals"]["refused"] >= 3, r["gateway"]["totals"]
PY

# The suite budget: each run spends 3 calls × (10 × 1000 + 5 × 2000) / 1e6 = $0.06; $0.10 is
# reached after two runs, which run one at a time.
write_suite suite.yaml "suite_budget: {cost: 0.10}"
R=$WORK/suite
expect_exit 4 "a suite over its budget" "$WORK/out" "$WORK/err" \
  env GW_KEY="$KEY" "$EVALBOX" run "$S/suite.yaml" --results "$R"
[ "$(lines "$R/results.jsonl")" = 2 ] || fail "runs went on after the suite budget was spent: $(lines "$R/results.jsonl")"
grep -q "the suite budget is spent (cost: \$0.12 of \$0.10; .*2 planned run(s) were not started" "$WORK/err" ||
  fail "the spent suite budget is not said: $(cat "$WORK/err")"
grep -q "Partial results: 2 of the plan.s 4 runs are missing" "$R/report.md" || fail "the report does not say runs are missing: $(grep -i missing "$R/report.md")"
# Resumed with the same budget: what the results hold counts, nothing starts.
expect_exit 4 "a resume over the suite budget" "$WORK/out" "$WORK/err" \
  env GW_KEY="$KEY" "$EVALBOX" run "$S/suite.yaml" --results "$R"
[ "$(lines "$R/results.jsonl")" = 2 ] || fail "a resume ran past the spent suite budget"
# A larger budget resumes the rest.
write_suite suite.yaml "suite_budget: {cost: 1.00}"
expect_exit 0 "a resume under a larger suite budget" "$WORK/out" "$WORK/err" \
  env GW_KEY="$KEY" "$EVALBOX" run "$S/suite.yaml" --results "$R"
[ "$(lines "$R/results.jsonl")" = 4 ] || fail "the resume did not run the rest"
# The reports take cost from the gateways (exact: 4 runs × $0.06) and give the calls' latency.
grep -q "^| asks | 4 | \$0.2400 | [0-9]*ms | [0-9]*ms | [0-9]*ms | [0-9]*ms | 0 |" "$R/report.md" ||
  fail "report.md has no model gateway row: $(grep -A4 'Model gateway' "$R/report.md")"
grep -q "asks *gateway: cost \$0.2400 (exact), TTFB p50 [0-9]* ms" "$WORK/out" ||
  fail "the terminal summary does not give the gateway's figures: $(cat "$WORK/out")"
grep -q 'id="table-gateway"' "$R/report.html" || fail "report.html has no gateway table"
python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["candidates"][0]["usage"]["gateway"]; assert g["runs"] == 4 and g["ttfb_ms"]["n"] == 4, g' \
  "$R/summary.json" || fail "summary.json has no gateway usage"

# A credential's requests_per_minute, honoured by the gateway in front of it: at 1 a minute the
# agent's second request waits for its slot, and the run's wall limit (6 s) ends it while it
# waits — recorded as such, never forwarded.
printf '%s\n' "$KEY" >"$S/key"
cat >"$S/rate.yaml" <<YAML
schema: evalbox.suite.v1
name: gateway-rate
fixtures: [f1]
credentials: {k: {path: key, requests_per_minute: 1}}
candidates:
  - id: asks
    adapter: command
    argv: [agents/call-model.py]
    env: {STUB_PORT: "$STUB_PORT", CALLS: "2"}
    credential: k
    gateway: {upstream: "http://127.0.0.1:$STUB_PORT/v1"}
limits: {wall: 6s}
YAML
expect_exit 0 "validate a rate" "$WORK/out" "$WORK/err" "$EVALBOX" validate "$S/rate.yaml"
grep -q "candidate asks: model gateway to .*, at most 1 request a minute with credential 'k'" \
  "$WORK/out" || fail "validate does not note the rate: $(cat "$WORK/out")"
: >"$STUB_LOG"
RR=$WORK/rate
expect_exit 1 "a run over its credential's rate" "$WORK/out" "$WORK/err" \
  "$EVALBOX" run "$S/rate.yaml" --results "$RR"
python3 - "$RR" "$STUB_LOG" <<'PY' || fail "requests_per_minute"
import json, sys
R, stub = sys.argv[1:3]
[r] = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert r["execution"]["outcome"] == "timed_out", r["execution"]
t = r["gateway"]["totals"]
assert t["failed"] == 1 and t["rate_waited"] == 0, t  # the held one ended unanswered
calls = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/model-calls.jsonl")]
assert len(calls) == 2, calls
waited = [c for c in calls if c.get("response", {}).get("status") == 503]
assert len(waited) == 1 and "waited for its credential's rate" in waited[0]["error"], calls
assert len([json.loads(l) for l in open(stub)]) == 1, "only the first request went upstream"
PY

if grep -rlF "$KEY" "$WORK/per-run" "$WORK/ignore" "$R" "$RR" "$EVALBOX_STATE_DIR" "$WORK/out" "$WORK/err" 2>/dev/null; then
  fail "the key leaked into the files above"
fi
no_residue
echo "ok: gateway budget"
