# The embedded default: the example suite runs, grades and reports; resume records nothing
# twice; `fixture test` accepts every example.
source "$(dirname "$0")/lib.sh"
need_isolation
R=$WORK/results
set +e
"$EVALBOX" run "$SRC/fixtures/examples/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
cat "$WORK/out"
# noop fails every fixture, so a task failed: exit 1 (not 2: no execution error).
[ "$rc" = 1 ] || { cat "$WORK/err"; fail "exit $rc, expected 1"; }
[ "$(lines "$R/results.jsonl")" = 24 ] || fail "expected 24 recorded runs"
python3 - "$R" <<'PY'
import json, sys, collections
R = sys.argv[1]
rows = [json.loads(l) for l in open(f"{R}/results.jsonl")]
by = collections.defaultdict(list)
for r in rows:
    assert r["schema"] == "evalbox.run.v1"
    assert r["execution"]["status"] == "completed", r["execution"]
    by[r["candidate"]["id"]].append(r["verdict"])
assert by["oracle"] == ["passed"] * 6, by["oracle"]
assert by["noop"] == ["failed"] * 6, by["noop"]
assert by["scripted"].count("passed") == 3, by["scripted"]
# The host-side loop solves the same three through the run's task session.
assert by["loop"].count("passed") == 3, by["loop"]
for r in rows:
    assert r["usage"]["cost_usd"] is None or r["candidate"]["id"] == "scripted"
s = json.load(open(f"{R}/summary.json"))
assert s["schema"] == "evalbox.summary.v1"
assert "junit" not in open(f"{R}/report.md").read()
j = open(f"{R}/junit.xml").read()
assert j.count("<testcase") == 24 and j.count("<failure") == 12, j.count("<failure")
PY
for f in report.md summary.json junit.xml; do [ -s "$R/$f" ] || fail "$f missing"; done
grep -q "oracle" "$R/report.md" || fail "report.md lacks the oracle"
# noop fails and oracle passes every fixture: six fixtures are no certainty (docs/statistics.md).
! grep -E '\[0\.0, 0\.0\]|\[100\.0, 100\.0\]' "$R/report.md" \
  || fail "an interval of zero width from six fixtures in report.md"
# Resume: nothing runs again, nothing is recorded twice.
set +e
"$EVALBOX" run "$SRC/fixtures/examples/suite.yaml" --results "$R" >/dev/null 2>"$WORK/err2"
set -e
grep -q "24 run(s) were already recorded" "$WORK/err2" || { cat "$WORK/err2"; fail "resume did not skip"; }
[ "$(lines "$R/results.jsonl")" = 24 ] || fail "resume recorded runs twice"
# Every example fixture is trustworthy.
"$EVALBOX" fixture test $(ls -d "$SRC"/fixtures/examples/*/ | grep -v -e /agents/ -e /skills/) ||
  fail "fixture test"
# Every verdict again from the runs' kept final states, the loop's (its session's frozen
# layers) and the git checks' (the workspace after setup) among them.
regrade_reproduces "$R"
no_residue
echo "example suite: ok"
