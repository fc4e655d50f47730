# One login, several runs at once: a credentialed candidate's runs never share the lease. With
# concurrency 3 and one codex login, the runner runs them one at a time, says so, and none of
# them fails or is retried for it (docs/architecture.md, "Credential leases").
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents

AUTH_SECRET="auth-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
mkdir -p "$WORK/creds" "$WORK/s"
printf '{"OPENAI_API_KEY": null, "evalbox_e2e": "%s"}\n' "$AUTH_SECRET" >"$WORK/creds/codex-auth.json"
chmod 600 "$WORK/creds/codex-auth.json"
start_stub --final "Created out.txt containing hello." --command "echo hello > out.txt"
cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: shared-login
fixtures: [hello]
credentials: {codex-login: $WORK/creds/codex-auth.json}
candidates:
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {base_url: "http://127.0.0.1:$STUB_PORT/v1", wire_api: responses}
    credential: codex-login
    auth_file: codex-login
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
trials: 3
concurrency: 3
YAML

R=$WORK/results
set +e
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$WORK/out" "$WORK/err" >&2; fail "evalbox run exited $rc"; }
grep -q "credential lease is in use" "$WORK/err" || { cat "$WORK/err" >&2; fail "the runner did not say it waited for the lease"; }
python3 - "$R" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert len(rows) == 3, len(rows)
for r in rows:
    assert r["verdict"] == "passed", (r["execution"], r["grading"])
    assert r["attempts"] == 1, r["attempts"]   # waited, never failed and retried
PY
no_residue
echo "shared login: ok"
