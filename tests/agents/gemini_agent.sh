# The real Gemini CLI, pinned, run by `evalbox run` inside the sandbox against the stub model
# server (Gemini API with SSE) with network {allow: [127.0.0.1:<stub port>]} and nothing else:
# the verdict, the commands in the normalized transcript, usage, the native chat files, that the
# grader was unreadable, and that the API key appears in no result, state or output file.
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
no_residue
echo "gemini: ok"
