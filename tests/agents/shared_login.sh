# One login, several runs at once: a credentialed candidate's runs never share the lease. With
# concurrency 3 and one codex login, the runner runs them one at a time, says so, and none of
# them fails or is retried for it (docs/architecture.md, "Credential leases"); two evalbox
# processes on that login take turns the same way.
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

# Two evalbox processes, one login (the same state root, so the same lease): the second waits
# for the first's run to end, says so, and neither fails or is retried for it.
sed -i 's/^trials: 3$/trials: 1/; s/^concurrency: 3$/concurrency: 1/' "$WORK/s/suite.yaml"
set +e
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$WORK/p1" >"$WORK/out-p1" 2>"$WORK/err-p1" &
p1=$!
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$WORK/p2" >"$WORK/out-p2" 2>"$WORK/err-p2" &
p2=$!
wait $p1; rc1=$?
wait $p2; rc2=$?
set -e
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] ||
  { cat "$WORK/err-p1" "$WORK/err-p2" >&2; fail "two processes on one login exited $rc1 and $rc2"; }
grep -q "held by another evalbox process" "$WORK/err-p1" "$WORK/err-p2" ||
  { cat "$WORK/err-p1" "$WORK/err-p2" >&2; fail "neither process said it waited for the other's lease"; }
for R in "$WORK/p1" "$WORK/p2"; do
  python3 - "$R" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert len(rows) == 1, len(rows)
assert rows[0]["verdict"] == "passed", (rows[0]["execution"], rows[0]["grading"])
assert rows[0]["attempts"] == 1, rows[0]["attempts"]
PY
  no_residue
done
echo "shared login: ok"
