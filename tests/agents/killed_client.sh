# A real client killed mid-run (the model never answers its second request; the fixture's wall
# limit ends the run) is an execution error of kind "agent", not a failed task, and the command
# it had already run is in its normalized transcript.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

start_stub --hang-after 1 --command "echo hello > out.txt"
mkdir -p "$WORK/s"
cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
sed -i 's/^limits: .*/limits: {wall: 8s, memory: 2GiB, pids: 512, disk: 512MiB, output: 8MiB}/' "$WORK/s/hello/fixture.yaml"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: killed
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
concurrency: 2
YAML

R=$WORK/results
set +e
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "evalbox run exited $rc, expected 2"; }
python3 - "$R" <<'PY'
import json, sys
R = sys.argv[1]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
assert set(rows) == {"codex", "claude"}, rows.keys()
for cid, r in rows.items():
    e = r["execution"]
    assert e["status"] == "error" and e["error_kind"] == "agent", (cid, e)
    assert e["outcome"] == "timed_out", (cid, e)
    assert e["error"].startswith(("codex was killed", "claude was killed")), (cid, e)
    assert r["verdict"] != "failed", (cid, r["verdict"])
    steps = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/transcript.jsonl")]
    cmds = [c.get("command") for s in steps if s.get("type") == "step" for c in s.get("tool_calls", [])]
    assert cmds == ["echo hello > out.txt"], (cid, cmds)
PY
no_residue
echo "killed client: ok"
