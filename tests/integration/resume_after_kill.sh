# kill -9 of the runner loses nothing already recorded; the next run completes the rest and
# records each run exactly once; the killed runs' sandboxes are reclaimed.
source "$(dirname "$0")/lib.sh"
need_isolation
R=$WORK/results
"$EVALBOX" run "$SRC/fixtures/examples/suite.yaml" --results "$R" --trials 2 -j 2 >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  [ "$(lines "$R/results.jsonl")" -ge 4 ] && break
  sleep 0.05
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
before=$(lines "$R/results.jsonl")
[ "$before" -ge 1 ] || fail "nothing was recorded before the kill"
[ "$before" -lt 48 ] || fail "the run finished before it could be killed"
set +e
"$EVALBOX" run "$SRC/fixtures/examples/suite.yaml" --results "$R" --trials 2 -j 2 >/dev/null 2>"$WORK/err"
set -e
[ "$(lines "$R/results.jsonl")" = 48 ] || { cat "$WORK/err"; fail "expected 48 records, got $(lines "$R/results.jsonl")"; }
dups=$(python3 -c 'import json,sys,collections; c=collections.Counter(json.loads(l)["run_id"] for l in open(sys.argv[1])); print(sum(1 for v in c.values() if v>1))' "$R/results.jsonl")
[ "$dups" = 0 ] || fail "$dups runs recorded twice"
no_residue
echo "resume after kill -9: ok ($before recorded before the kill)"
