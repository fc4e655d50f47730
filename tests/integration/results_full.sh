# A results directory that fills up mid-suite (a small tmpfs): evalbox stops with an error that
# says so, results.jsonl holds only whole records, and once there is room a later run resumes
# and records every run exactly once.
source "$(dirname "$0")/lib.sh"
need_isolation
R=$WORK/results
mkdir -p "$R"
mount -t tmpfs -o size=160k evalbox-results-full "$R"  # lib.sh's cleanup unmounts it
SUITE=$SRC/fixtures/examples/suite.yaml
set +e
"$EVALBOX" run "$SUITE" --results "$R" -j 2 >/dev/null 2>"$WORK/err"
rc=$?
set -e
[ "$rc" = 70 ] || { cat "$WORK/err"; fail "a full results directory must stop evalbox (70), not $rc"; }
grep -q "the results directory is full: free space there and run again" "$WORK/err" ||
  { cat "$WORK/err"; fail "the error must say the results directory is full"; }
before=$(lines "$R/results.jsonl")
[ "$before" -lt 24 ] || fail "the suite finished although the results directory was full"
python3 - "$R/results.jsonl" <<'PY' || fail "results.jsonl holds a partial record"
import json, os, sys
p = sys.argv[1]
if os.path.exists(p):
    data = open(p, "rb").read()
    assert data == b"" or data.endswith(b"\n"), data[-80:]
    for line in data.splitlines():
        assert json.loads(line)["schema"] == "evalbox.run.v1"
PY
mount -o remount,size=16m "$R"
set +e
"$EVALBOX" run "$SUITE" --results "$R" -j 2 >/dev/null 2>"$WORK/err2"
rc=$?
set -e
# The example suite's scripted agent fails some fixtures: 1, never an error.
[ "$rc" = 1 ] || { cat "$WORK/err2"; fail "the resumed run exited $rc"; }
[ "$(lines "$R/results.jsonl")" = 24 ] || fail "expected 24 records, got $(lines "$R/results.jsonl")"
dups=$(python3 -c 'import json,sys,collections; c=collections.Counter(json.loads(l)["run_id"] for l in open(sys.argv[1])); print(sum(1 for v in c.values() if v>1))' "$R/results.jsonl")
[ "$dups" = 0 ] || fail "$dups runs recorded twice"
grep -q "were already recorded" "$WORK/err2" || [ "$before" = 0 ] || fail "the second run did not resume"
no_residue
echo "results on a full filesystem: ok ($before recorded before it filled)"
