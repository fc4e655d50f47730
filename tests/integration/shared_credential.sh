# Runs on one credential, in the real sandbox: with max_concurrent 2 two runs hold it at once
# (never three, at concurrency 4), by default one at a time; each run's wait for it is in its
# run.json (timings.credential_wait_ms). Each agent prints when it starts and ends, read back
# from its native/stdout.txt.
source "$(dirname "$0")/lib.sh"
need_isolation
mkdir -p "$WORK/s/hold/workspace"
echo content > "$WORK/s/hold/workspace/file.txt"
cat > "$WORK/s/hold/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: hold
prompt: hold the key a moment
checks:
  - {id: there, file: {path: file.txt, exists: true}}
YAML
echo "sk-test-shared-0123" > "$WORK/s/key"
chmod 600 "$WORK/s/key"
mk_suite() {  # NAME CREDENTIAL-YAML
  cat > "$WORK/s/$1.yaml" <<YAML
schema: evalbox.suite.v1
name: $1
fixtures: [hold]
credentials:
  key: $2
candidates:
  - id: agent
    adapter: command
    argv: [sh, -c, "date +%s.%N; sleep 1.5; date +%s.%N"]
    transcript: none
    credential: key
trials: 4
concurrency: 4
YAML
}
# The most agents running at once, then the runs whose credential_wait_ms is above 0 (every
# run must have one).
measure() {
  python3 - "$1" <<'PY'
import json, os, sys
root = sys.argv[1]
spans, waited = [], 0
for line in open(os.path.join(root, "results.jsonl")):
    r = json.loads(line)
    assert r["verdict"] == "passed", r["execution"]
    w = r["timings"]["credential_wait_ms"]
    assert isinstance(w, int) and w >= 0, r["timings"]
    waited += w > 0
    out = open(os.path.join(root, "runs", r["run_id"], "native", "stdout.txt")).read().split()
    spans.append((float(out[0]), float(out[1])))
most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
print(most, waited)
PY
}
mk_suite shared "{path: key, max_concurrent: 2}"
expect_exit 0 "a shared key" "$WORK/out-shared" "$WORK/err-shared" \
  "$EVALBOX" run "$WORK/s/shared.yaml" --results "$WORK/r-shared"
read -r most waited <<<"$(measure "$WORK/r-shared")"
[ "$most" = 2 ] || fail "max_concurrent 2 at concurrency 4: $most agents at once, expected 2"
[ "$waited" -ge 2 ] || fail "two runs waited for the key: $waited say so"

mk_suite exclusive "key"
expect_exit 0 "an exclusive key" "$WORK/out-excl" "$WORK/err-excl" \
  "$EVALBOX" run "$WORK/s/exclusive.yaml" --results "$WORK/r-excl"
read -r most waited <<<"$(measure "$WORK/r-excl")"
[ "$most" = 1 ] || fail "a credential without max_concurrent: $most agents at once, expected 1"
[ "$waited" = 3 ] || fail "three runs waited for the key: $waited say so"
grep -q "credential wait: 3 run(s) waited" "$WORK/out-excl" "$WORK/err-excl" ||
  { cat "$WORK/out-excl" "$WORK/err-excl"; fail "the summary must show the credential wait"; }
grep -q "### Credential wait" "$WORK/r-excl/report.md" || fail "report.md: no credential wait"
! grep -rq "sk-test-shared" "$WORK/r-shared" "$WORK/r-excl" || fail "the key in the results"
no_residue
echo "shared credential: ok"
