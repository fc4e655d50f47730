# MCP servers and skills with the real Codex CLI and Gemini CLI against the stub model
# (docs/agents.md, "Skills, MCP servers and hooks"), from the configuration each adapter wrote:
#   - Gemini CLI (mcpServers and hooks in settings.json, the skill in ~/.gemini/skills) starts
#     the server inside the sandbox and offers its tool; the stub asks for it, the server logs
#     the call with its env into the workspace, and its answer reaches the model in the next
#     request; the skill's description is in its request; a BeforeTool hook sees the shell
#     command the stub asks for next;
#   - Codex ([mcp_servers.NAME] in config.toml, the skill in ~/.agents/skills) likewise: it
#     finds the server's tool through its tool_search, runs it, and passes its answer on; the
#     skill's description is in its request.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

rand() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }
STUB_EXTRA=()
KEY="sk-evalbox-ext-$(rand)"
MARK="skill-marker-$(rand)"
TAG="tag-$(rand)"
S=$WORK/s
mkdir -p "$S/skills/evalbox-probe" "$S/mcp" "$S/ext/workspace"
cat >"$S/skills/evalbox-probe/SKILL.md" <<MD
---
name: evalbox-probe
description: Looks keys up in the probe index ($MARK). Use when a task names a probe key.
---
Call the probe server's lookup tool with the key.
MD
cp "$SRC/tests/agents/mcp_probe.py" "$S/mcp/mcp_probe.py"
echo "The probe task." >"$S/ext/workspace/README.md"
cat >"$S/ext/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: ext
prompt: Look up key k1 with the probe tool.
limits: {wall: 3m, memory: 2GiB, pids: 512, disk: 512MiB, output: 8MiB}
network: none
checks:
  - {id: mcp-called, file: {path: mcp-calls.log, contains: "\"key\": \"k1\""}}
YAML

# run_client ID TOOL CANDIDATE-YAML: one candidate against a fresh stub that calls TOOL; the
# run must pass (the server logged the call) and the server's answer must reach the model.
run_client() {
  local id=$1 tool=$2
  : >"$WORK/stub.port"
  start_stub --key "$KEY" --final "Looked k1 up." --watch "$MARK" --watch "PROBE-ANSWER k1 $TAG" \
    --call "$tool={\"key\": \"k1\"}" "${STUB_EXTRA[@]}"
  cat >"$S/$id.yaml" <<YAML
schema: evalbox.suite.v1
name: ext-$id
fixtures: [ext]
candidates:
$(echo "$3" | sed "s/STUB_PORT/$STUB_PORT/g; s/^/  /")
YAML
  local R=$WORK/results-$id rc=0
  EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$S/$id.yaml" --results "$R" >"$WORK/out-$id" 2>"$WORK/err-$id" ||
    rc=$?
  if [ "$rc" != 0 ]; then
    cat "$WORK/out-$id" "$WORK/err-$id" >&2
    grep -h missing_tool "$STUB_LOG" >&2 || true
    for f in "$R"/runs/*/native/stderr.txt; do echo "== $f" >&2; tail -30 "$f" >&2; done
    fail "$id: evalbox run exited $rc, expected 0"
  fi
  python3 - "$R" "$STUB_LOG" "$TAG" <<'PY' || fail "$id: the MCP call"
import json, sys
R, stub_log, tag = sys.argv[1:4]
row = json.loads(open(f"{R}/results.jsonl").readline())
assert row["verdict"] == "passed", row
log = [json.loads(l) for l in open(stub_log)]
assert not [e for e in log if "missing_tool" in e], [e for e in log if "missing_tool" in e]
posts = [e for e in log if e.get("method") == "POST"]
assert any(f"PROBE-ANSWER k1 {tag}" in e.get("watched", []) for e in posts), \
    "the MCP server's answer never reached the model"
diff = open(f"{R}/runs/{row['run_id']}/workspace.diff").read()
assert '"tool": "lookup"' in diff and f'"tag": "{tag}"' in diff, diff[:2000]
PY
  LAST_RESULTS=$R
}

SERVER="mcp_servers:
      probe:
        command: [python3, mcp/mcp_probe.py]
        env: {PROBE_LOG: /workspace/mcp-calls.log, PROBE_TAG: \"$TAG\"}"

# Codex 0.171 defers MCP tools behind its tool_search: the stub searches first (a
# tool_search_call), Codex answers with the server's namespace (mcp__probe, its tool lookup),
# and the stub then calls the tool in it — which Codex runs only because evalbox approves the
# server's tools (codex exec's approval policy "never" refuses one that needs approval).
run_client codex mcp__probe__lookup "- id: codex
  adapter: codex
  model: gpt-5.5
  provider: {base_url: \"http://127.0.0.1:STUB_PORT/v1\", env_key: EVALBOX_STUB_KEY, wire_api: responses}
  api_key_env: EVALBOX_E2E_KEY
  network: {allow: [\"127.0.0.1:STUB_PORT\"]}
  skills: [skills/evalbox-probe]
  $SERVER"
python3 - "$STUB_LOG" "$MARK" "$LAST_RESULTS" <<'PY' || fail "codex: the skill or the MCP call"
import glob, json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
assert any(sys.argv[2] in e.get("watched", []) for e in log if e.get("method") == "POST"), \
    "the skill's description never reached the model"
# Codex's own record of the call: completed, with the server's answer.
calls = [json.loads(l)["item"] for f in glob.glob(sys.argv[3] + "/runs/*/native/stdout.jsonl")
         for l in open(f) if '"mcp_tool_call"' in l and '"item.completed"' in l]
assert len(calls) == 1 and calls[0]["status"] == "completed" and not calls[0]["error"], calls
assert calls[0]["server"] == "probe" and calls[0]["tool"] == "lookup", calls
PY
stop_stub

# Gemini also runs a BeforeTool hook before the shell command the stub asks for next.
cat >"$S/record-tool.sh" <<'SH'
#!/bin/sh
cat >>/workspace/hook-ran.txt
echo >>/workspace/hook-ran.txt
SH
chmod +x "$S/record-tool.sh"
STUB_EXTRA=(--command "echo hello > out.txt")
run_client gemini "${GEMINI_TOOL:-mcp_probe_lookup}" "- id: gemini
  adapter: gemini
  model: gemini-2.5-flash
  base_url: \"http://127.0.0.1:STUB_PORT\"
  api_key_env: EVALBOX_E2E_KEY
  network: {allow: [\"127.0.0.1:STUB_PORT\"]}
  skills: [skills/evalbox-probe]
  hooks: {BeforeTool: [{matcher: run_shell_command, command: record-tool.sh}]}
  $SERVER"
grep -q 'echo hello > out.txt' "$LAST_RESULTS"/runs/*/workspace.diff &&
  grep -q '"hook_event_name":"BeforeTool"' "$LAST_RESULTS"/runs/*/workspace.diff ||
  fail "gemini: the BeforeTool hook did not see the shell command"
python3 - "$STUB_LOG" "$MARK" <<'PY' || fail "gemini: the skill never reached the model"
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
assert any(sys.argv[2] in e.get("watched", []) for e in log if e.get("method") == "POST")
PY
stop_stub
no_residue
echo "extensions (codex, gemini): ok"
