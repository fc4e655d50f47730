# A fixture's follow_up prompt resumes the real client's session: the second launch's model
# request carries the first launch's tool results (the conversation, not a fresh session), both
# launches are recorded, and the transcript holds the commands of the first and the answer to
# the second.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

start_stub --final "Created out.txt containing hello." --command "echo hello > out.txt"
mkdir -p "$WORK/s"
cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
printf 'follow_up: Check that out.txt is still there.\n' >>"$WORK/s/hello/fixture.yaml"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: follow-up
fixtures: [hello]
candidates:
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {base_url: "http://127.0.0.1:$STUB_PORT/v1", wire_api: responses}
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
  - id: claude
    adapter: claude-code
    base_url: "http://127.0.0.1:$STUB_PORT"
    env: {ANTHROPIC_API_KEY: not-a-secret}
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
YAML

R=$WORK/results
set +e
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "evalbox run exited $rc"; }
python3 - "$R" "$STUB_LOG" <<'PY'
import json, sys
R, stub_log = sys.argv[1:3]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
for cid, r in rows.items():
    assert r["verdict"] == "passed", (cid, r["execution"], r["grading"])
    assert set(r["execution"]["records"]) >= {"agent", "follow-up"}, (cid, r["execution"]["records"].keys())
    run = f"{R}/runs/{r['run_id']}"
    steps = [json.loads(l) for l in open(f"{run}/transcript.jsonl")]
    summary = [s for s in steps if s.get("type") != "step"][-1]
    steps = [s for s in steps if s.get("type") == "step"]
    cmds = [c.get("command") for s in steps for c in s.get("tool_calls", [])]
    assert cmds == ["echo hello > out.txt"], (cid, cmds)
    # Two launches, each ending in the scripted final message.
    finals = [s for s in steps if s.get("message") == "Created out.txt containing hello."]
    assert len(finals) == 2, (cid, steps)
log = [json.loads(l) for l in open(stub_log)]
for suffix in ("/responses", "/messages"):
    calls = [e for e in log if e["method"] == "POST" and e["path"].endswith(suffix) and e["tools"]]
    # First launch: 0 then 1 tool result; the resumed launch starts with the earlier one.
    assert [e["tool_results"] for e in calls] == [0, 1, 1], (suffix, calls)
PY
no_residue
echo "follow-up: ok"
