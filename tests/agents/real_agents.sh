# The real Codex CLI and Claude Code, pinned, run by `evalbox run` inside the sandbox against
# the stub model server, with network {allow: [127.0.0.1:<stub port>]} and nothing else.
# The stub scripts the same shell commands for both clients:
#   1. echo hello > out.txt            the task (both pass the fixture)
#   2. cat <host credential source>    must fail: the host path is not visible inside
#   3. ls /grader                      must fail: the grader is mounted only while grading
#   4. touch /home/agent/outside.txt   fails only under Codex's own workspace-write sandbox
#                                      (bubblewrap, nested in ours); Claude runs it unsandboxed.
#                                      The command reports touch's status and exits 0: Codex
#                                      0.171.0 emits no item for a command its sandbox denied
# and asserts verdicts, exit codes in the normalized transcripts, usage, native session files,
# and that neither the API key nor the leased file's content appears in results or state.
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

KEY="sk-evalbox-e2e-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
AUTH_SECRET="auth-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
mkdir -p "$WORK/creds" "$WORK/s"
# Lease sources: owner-only files whose content must never leave the lease.
printf '{"OPENAI_API_KEY": null, "evalbox_e2e": "%s"}\n' "$AUTH_SECRET" >"$WORK/creds/codex-auth.json"
printf '{"evalbox_e2e": "%s"}\n' "$AUTH_SECRET" >"$WORK/creds/claude-credentials.json"
chmod 600 "$WORK/creds/"*.json

start_stub --key "$KEY" --final "Created out.txt containing hello." \
  --command "echo hello > out.txt" \
  --command "cat $WORK/creds/codex-auth.json" \
  --command "ls /grader" \
  --command 'touch /home/agent/outside.txt 2>&1; echo "touch-exit=$?"'

cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: real-agents
fixtures: [hello]
credentials: {codex-login: $WORK/creds/codex-auth.json, claude-login: $WORK/creds/claude-credentials.json}
candidates:
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {base_url: "http://127.0.0.1:$STUB_PORT/v1", env_key: EVALBOX_STUB_KEY, wire_api: responses}
    api_key_env: EVALBOX_E2E_KEY
    credential: codex-login
    auth_file: codex-login
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
  - id: claude
    adapter: claude-code
    base_url: "http://127.0.0.1:$STUB_PORT"
    api_key_env: EVALBOX_E2E_KEY
    credential: claude-login
    credentials_file: claude-login
    permission_mode: bypass
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
concurrency: 2
YAML

R=$WORK/results
set +e
EVALBOX_E2E_KEY=$KEY "$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/out" "$WORK/err" >&2; for f in "$R"/runs/*/native/stderr.txt; do echo "== $f" >&2; tail -20 "$f" >&2; done; fail "evalbox run exited $rc"; }

python3 - "$R" "$STUB_LOG" "$AUTH_SECRET" <<'PY'
import glob, json, sys
R, stub_log, auth_secret = sys.argv[1:4]
rows = {r["candidate"]["id"]: r for r in map(json.loads, open(f"{R}/results.jsonl"))}
assert set(rows) == {"codex", "claude"}, rows.keys()
for cid, r in rows.items():
    assert r["execution"]["status"] == "completed", (cid, r["execution"])
    assert r["verdict"] == "passed", (cid, r["grading"])
    u = r["usage"]
    assert u["input_tokens"] and u["input_tokens"] >= 50, (cid, u)   # >= 5 model calls x 10
    assert u["output_tokens"] and u["output_tokens"] >= 25, (cid, u)
assert rows["codex"]["usage"]["cost_usd"] is None, rows["codex"]["usage"]  # Codex reports none
assert rows["claude"]["usage"]["cost_usd"] is not None, rows["claude"]["usage"]
# Codex's own sandbox needs mounts: the run record says Landlock was off for it only.
mech = {cid: r["execution"]["records"]["agent"]["mechanisms"] for cid, r in rows.items()}
assert mech["codex"]["landlock_abi"] == 0 and "own sandbox" in mech["codex"]["landlock_reason"], mech
assert mech["claude"]["landlock_abi"] > 0, mech["claude"]

def calls(cid):
    run = f"{R}/runs/{rows[cid]['run_id']}"
    steps = [json.loads(l) for l in open(f"{run}/transcript.jsonl")]
    steps = [s for s in steps if s.get("type") == "step"]
    obs = {o["call_id"]: o for s in steps for o in s.get("observations", [])}
    out = {}
    for s in steps:
        for c in s.get("tool_calls", []):
            if c.get("tool") == "shell":
                out[c["command"]] = obs.get(c["id"], {})
    return run, out

for cid in ("codex", "claude"):
    run, cmds = calls(cid)
    def find(prefix):
        hits = [o for c, o in cmds.items() if c.startswith(prefix)]
        assert hits, (cid, prefix, list(cmds))
        return hits[0]
    hello = find("echo hello > out.txt")
    cred = find("cat ")
    grader = find("ls /grader")
    outside = find("touch /home/agent/outside.txt")
    if cid == "codex":
        assert hello.get("exit_code") == 0, (cid, hello)
        assert cred.get("exit_code") not in (None, 0), (cid, cred)
        assert grader.get("exit_code") not in (None, 0), (cid, grader)
        # Denied by Codex's nested bubblewrap sandbox (our own sandbox lets it write there).
        assert "touch-exit=1" in outside.get("output", ""), (cid, outside)
        assert "Read-only file system" in outside.get("output", ""), (cid, outside)
        assert glob.glob(f"{run}/native/codex-sessions/rollout-*.jsonl"), cid
    else:
        # Claude Code reports no exit code for Bash; is_error says whether it failed.
        assert hello.get("is_error") is False, (cid, hello)
        assert cred.get("is_error") is True, (cid, cred)
        assert grader.get("is_error") is True, (cid, grader)
        assert "touch-exit=0" in outside.get("output", ""), (cid, outside)
        assert glob.glob(f"{run}/native/claude-projects/*/*.jsonl"), cid
    assert auth_secret not in json.dumps(cred), (cid, cred)
    assert "No such file" in cred.get("output", ""), (cid, cred)

# Every model call came from a real client over the relay, carrying the key it was given.
log = [json.loads(l) for l in open(stub_log)]
model_calls = [e for e in log if e["method"] == "POST" and e["path"].endswith(("/responses", "/messages"))]
assert len([e for e in model_calls if e["path"].endswith("/responses")]) >= 5, log
assert len([e for e in model_calls if e["path"].endswith("/messages")]) >= 5, log
assert all(e["key_ok"] for e in model_calls), model_calls
PY

# Neither the API key nor the leased file's content is anywhere in results or state, except
# that the lease store keeps its owner-only copy of the credential by design (docs/state.md:
# a token the agent rotates persists into the next run).
if grep -rlF "$KEY" "$R" "$EVALBOX_STATE_DIR" "$WORK/out" "$WORK/err" 2>/dev/null; then fail "the API key leaked into the files above"; fi
if grep -rlF "$AUTH_SECRET" "$R" 2>/dev/null; then fail "the credential leaked into the results above"; fi
if grep -rlF --exclude-dir=credential-leases "$AUTH_SECRET" "$EVALBOX_STATE_DIR" 2>/dev/null; then
  fail "the credential leaked into the state files above"
fi
for f in "$EVALBOX_STATE_DIR"/credential-leases/*; do
  [ "$(stat -c %a "$f")" = 600 ] || fail "lease $f is not owner-only"
done
no_residue
echo "real agents: ok"
