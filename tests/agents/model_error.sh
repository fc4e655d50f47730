# An upstream model failure (HTTP 500 on every model call) with the real clients in the sandbox
# is an execution error of kind "agent" carrying the client's own message, not a failed task.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

start_stub --fail-status 500
mkdir -p "$WORK/s"
cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: model-error
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
    env: {ANTHROPIC_API_KEY: not-a-secret, CLAUDE_CODE_MAX_RETRIES: "0"}
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
concurrency: 2
YAML

R=$WORK/results
set +e
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
# 2: an execution error, not a task failure (docs/results.md).
[ "$rc" = 2 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "evalbox run exited $rc, expected 2"; }
python3 - "$R" <<'PY'
import json, sys
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(sys.argv[1] + "/results.jsonl"))}
assert set(rows) == {"codex", "claude"}, rows.keys()
for cid, r in rows.items():
    e = r["execution"]
    assert e["status"] == "error" and e["error_kind"] == "agent", (cid, e)
    assert r["verdict"] != "failed", (cid, r["verdict"])
# Each client's own words: Claude Code's synthesized "API Error: 500 ...", Codex's turn.failed.
assert "500" in rows["claude"]["execution"]["error"], rows["claude"]["execution"]["error"]
assert rows["codex"]["execution"]["error"], rows["codex"]["execution"]
PY
no_residue
echo "model error: ok"
