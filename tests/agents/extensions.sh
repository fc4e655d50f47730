# Skills, MCP servers and hooks with the real Claude Code against the stub model (docs/agents.md,
# "Skills, MCP servers and hooks"). One candidate has a skill, an MCP server and a PreToolUse
# hook; its pair has none. The stub asks for the server's tool, then for a shell command, and
#   - the skill's description reaches the model in the client's request (the client lists it);
#   - the server, started by the client inside the sandbox with its env, logs the call into the
#     workspace, and its answer reaches the model in the next request;
#   - the hook runs before the shell command and leaves the command in a file;
#   - the skill is read-only inside (a write to it fails) and unchanged on the host;
#   - run.json records the digests of the skill, the server's file and the hook;
#   - the candidate without them fails the same task (no tool to call: the stub ends the turn).
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

rand() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }
KEY="sk-evalbox-ext-$(rand)"
MARK="skill-marker-$(rand)"
TAG="tag-$(rand)"
S=$WORK/s
mkdir -p "$S/skills/evalbox-probe" "$S/mcp" "$S/hooks" "$S/ext/workspace"

cat >"$S/skills/evalbox-probe/SKILL.md" <<MD
---
name: evalbox-probe
description: Looks keys up in the probe index ($MARK). Use when a task names a probe key.
---
Call the probe server's lookup tool with the key, then do what the task asks.
MD
cp "$SRC/tests/agents/mcp_probe.py" "$S/mcp/mcp_probe.py"
cat >"$S/hooks/record-bash.sh" <<'SH'
#!/bin/sh
# A PreToolUse hook: appends the tool call the client hands it (JSON on stdin) to a file.
cat >>/workspace/hook-ran.txt
echo >>/workspace/hook-ran.txt
SH
chmod +x "$S/hooks/record-bash.sh"

echo "The probe task." >"$S/ext/workspace/README.md"
cat >"$S/ext/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: ext
prompt: Look up key k1 with the probe, then create out.txt containing hello.
limits: {wall: 3m, memory: 2GiB, pids: 512, disk: 512MiB, output: 8MiB}
network: none
checks:
  - {id: out-file, file: {path: out.txt, equals: "hello\n"}}
  - {id: mcp-called, file: {path: mcp-calls.log, contains: "\"key\": \"k1\""}}
  - {id: hook-ran, file: {path: hook-ran.txt, contains: "echo hello > out.txt"}}
YAML

start_stub --key "$KEY" --final "Looked k1 up and created out.txt." \
  --watch "$MARK" --watch "PROBE-ANSWER k1 $TAG" \
  --call 'mcp__probe__lookup={"key": "k1"}' \
  --command 'echo x > /home/agent/.claude/skills/evalbox-probe/SKILL.md 2>&1; echo "skill-write=$?"' \
  --command "echo hello > out.txt"

cat >"$S/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: extensions
fixtures: [ext]
baseline: claude-plain
candidates:
  - id: claude-with-skill
    adapter: claude-code
    base_url: "http://127.0.0.1:$STUB_PORT"
    api_key_env: EVALBOX_E2E_KEY
    permission_mode: bypass
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
    skills: [skills/evalbox-probe]
    mcp_servers:
      probe:
        command: [python3, mcp/mcp_probe.py]
        env: {PROBE_LOG: /workspace/mcp-calls.log, PROBE_TAG: "$TAG"}
    hooks: {PreToolUse: [{matcher: Bash, command: hooks/record-bash.sh}]}
  - id: claude-plain
    adapter: claude-code
    base_url: "http://127.0.0.1:$STUB_PORT"
    api_key_env: EVALBOX_E2E_KEY
    permission_mode: bypass
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
concurrency: 2
YAML

"$EVALBOX" validate "$S/suite.yaml" >"$WORK/validate.out" 2>&1 ||
  { cat "$WORK/validate.out" >&2; fail "evalbox validate refused the suite"; }
# The documented pair (docs/agents.md) is a valid suite too.
ANTHROPIC_API_KEY=unused "$EVALBOX" validate "$SRC/fixtures/examples/skill-pair.yaml" \
  >"$WORK/validate-pair.out" 2>&1 ||
  { cat "$WORK/validate-pair.out" >&2; fail "evalbox validate refused fixtures/examples/skill-pair.yaml"; }

R=$WORK/results
set +e
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$S/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
# 1: a task failed (the candidate without the skill, server and hook), nothing else.
[ "$rc" = 1 ] || {
  cat "$WORK/out" "$WORK/err" >&2
  for f in "$R"/runs/*/native/stderr.txt; do echo "== $f" >&2; tail -20 "$f" >&2; done
  fail "evalbox run exited $rc, expected 1"
}

python3 - "$R" "$STUB_LOG" "$MARK" "$TAG" <<'PY'
import json, re, sys
R, stub_log, mark, tag = sys.argv[1:5]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
assert set(rows) == {"claude-with-skill", "claude-plain"}, rows.keys()
checks = {cid: {c["id"]: c["passed"] for c in r["grading"]["checks"]} for cid, r in rows.items()}
w, p = rows["claude-with-skill"], rows["claude-plain"]
assert w["execution"]["status"] == "completed", w["execution"]
assert w["verdict"] == "passed", checks["claude-with-skill"]
# The pair: the same model and task without them has no tool to call (the stub then ends the
# turn) and no hook: it fails every check.
assert p["execution"]["status"] == "completed", p["execution"]
assert p["verdict"] == "failed", checks["claude-plain"]
assert checks["claude-plain"] == {"out-file": False, "mcp-called": False, "hook-ran": False}, checks

log = [json.loads(l) for l in open(stub_log)]
posts = [e for e in log if e.get("method") == "POST"]
assert any(mark in e.get("watched", []) for e in posts), "the skill never reached the model"
assert any(f"PROBE-ANSWER k1 {tag}" in e.get("watched", []) for e in posts), \
    "the MCP server's answer never reached the model"
missing = [e for e in log if "missing_tool" in e]
# Only the plain candidate lacked the tool.
assert len(missing) >= 1 and all(e["missing_tool"] == "mcp__probe__lookup" for e in missing), missing

run = f"{R}/runs/{w['run_id']}"
# The server ran inside the sandbox with its env, and logged the call into the workspace.
diff = open(f"{run}/workspace.diff").read()
assert '"tool": "lookup"' in diff and f'"tag": "{tag}"' in diff, diff[:2000]
# The hook saw the shell command before it ran.
assert "hook-ran.txt" in diff and "echo hello > out.txt" in diff, diff[:2000]
# The skill is read-only inside.
out = open(f"{run}/transcript.jsonl").read()
m = re.search(r"skill-write=(\d+)", out)
assert m and m.group(1) != "0", "a write to the skill succeeded inside the sandbox"

ext = json.load(open(f"{run}/run.json"))["candidate"]["extensions"]
hexd = re.compile(r"^[0-9a-f]{64}$")
assert hexd.match(ext["skills"]["evalbox-probe"]), ext
assert hexd.match(ext["mcp_servers"]["probe"]["/evalbox/mcp/probe/mcp_probe.py"]), ext
assert ext["hooks"][0]["event"] == "PreToolUse" and hexd.match(ext["hooks"][0]["sha256"]), ext
assert ext["hooks"][0]["path"] == "/evalbox/hooks/0/record-bash.sh", ext
assert "extensions" not in json.load(open(f"{R}/runs/{p['run_id']}/run.json"))["candidate"]
PY

grep -q "$MARK" "$S/skills/evalbox-probe/SKILL.md" || fail "the skill changed on the host"
# A changed skill is another candidate: its run gets a new id (and runs again).
before=$(python3 -c 'import json,sys; print([r["run_id"] for r in map(json.loads, open(sys.argv[1])) if r["candidate"]["id"] == "claude-with-skill"][0])' "$R/results.jsonl")
echo "Edited." >>"$S/skills/evalbox-probe/SKILL.md"
R2=$WORK/results-edited
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$S/suite.yaml" --results "$R2" --filter 'ext/claude-with-skill' \
  >"$WORK/out2" 2>"$WORK/err2" || { cat "$WORK/out2" "$WORK/err2" >&2; fail "the run with the edited skill failed"; }
after=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["run_id"])' "$R2/results.jsonl")
[ -n "$after" ] && [ "$after" != "$before" ] || fail "the edited skill kept its run id $before"
no_residue
echo "extensions: ok"
