# Shards as a scheduler runs them (--shard auto/3, K from SLURM_ARRAY_TASK_ID), each into
# RESULTS/shards/K. Shard 1 is killed mid-run: merging then reports its runs missing and exits
# 1 without writing; with --partial the reports say how many are missing. Requeued, shard 1
# resumes without duplicates, and the complete merge has every run once.
source "$(dirname "$0")/lib.sh"
need_isolation
R=$WORK/results
SUITE=$SRC/fixtures/examples/suite.yaml
shard() {  # shard K [evalbox run options...]: as array task K would
  local k=$1; shift
  SLURM_ARRAY_TASK_ID=$k "$EVALBOX" run "$SUITE" --results "$R" --trials 2 --shard auto/3 "$@"
}
for k in 0 2; do
  set +e; shard $k -j 2 >/dev/null 2>"$WORK/err$k"; rc=$?; set -e
  [ "$rc" = 0 ] || [ "$rc" = 1 ] || { cat "$WORK/err$k" >&2; fail "shard $k exited $rc"; }
  [ "$(lines "$R/shards/$k/results.jsonl")" = 16 ] || fail "shard $k recorded $(lines "$R/shards/$k/results.jsonl") of 16"
done
# evalbox itself in the background (not a subshell around it), so that kill -9 reaches it.
SLURM_ARRAY_TASK_ID=1 "$EVALBOX" run "$SUITE" --results "$R" --trials 2 --shard auto/3 -j 1 \
  >/dev/null 2>"$WORK/err1" &
pid=$!
for _ in $(seq 1 600); do
  [ "$(lines "$R/shards/1/results.jsonl")" -ge 2 ] && break
  sleep 0.05
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
before=$(lines "$R/shards/1/results.jsonl")
[ "$before" -ge 1 ] && [ "$before" -lt 16 ] || fail "shard 1 was not killed mid-run ($before of 16 recorded)"
"$EVALBOX" gc >/dev/null 2>&1 || true  # what kill -9 left behind (a requeue would reclaim it too)

M=$WORK/merged
set +e
"$EVALBOX" merge "$R"/shards/0 "$R"/shards/1 "$R"/shards/2 --into "$M" >"$WORK/m1.out" 2>"$WORK/m1.err"
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$WORK/m1.err" >&2; fail "merge with shard 1 unfinished exited $rc, not 1"; }
grep -q "shard 1/3 ($R/shards/1): $((16 - before)) of 16 run(s) missing" "$WORK/m1.err" ||
  { cat "$WORK/m1.err" >&2; fail "the missing runs of shard 1 are not listed"; }
[ ! -e "$M/results.jsonl" ] || fail "a merge with missing runs wrote results without --partial"

"$EVALBOX" merge "$R"/shards/* --into "$M" --partial >"$WORK/m2.out" 2>"$WORK/m2.err" ||
  { cat "$WORK/m2.err" >&2; fail "merge --partial failed"; }
missing=$((16 - before))
grep -q "Partial results: $missing of the plan's 48 runs are missing" "$M/report.md" ||
  fail "report.md does not say that $missing runs are missing"
grep -q "data-missing=\"$missing\"" "$M/report.html" || fail "report.html does not say it"
python3 - "$M/summary.json" "$missing" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
assert runs["missing"] == int(sys.argv[2]) and runs["planned"] == 48, runs
assert runs["total"] == 48 - int(sys.argv[2]), runs
PY

# The requeued shard resumes: what was recorded is not run again.
set +e; shard 1 -j 2 >/dev/null 2>"$WORK/err1b"; rc=$?; set -e
[ "$rc" = 0 ] || [ "$rc" = 1 ] || { cat "$WORK/err1b" >&2; fail "requeued shard 1 exited $rc"; }
grep -q "$before run(s) were already recorded" "$WORK/err1b" ||
  { cat "$WORK/err1b" >&2; fail "the requeued shard did not resume"; }
"$EVALBOX" merge "$R"/shards/* --into "$M" >"$WORK/m3.out" 2>"$WORK/m3.err" ||
  { cat "$WORK/m3.err" >&2; fail "the complete merge failed"; }
python3 - "$R" "$M" <<'PY'
import collections, json, sys
root, merged = sys.argv[1], sys.argv[2]
for k in range(3):
    ids = [json.loads(l)["run_id"] for l in open(f"{root}/shards/{k}/results.jsonl")]
    assert len(ids) == len(set(ids)) == 16, (k, len(ids), len(set(ids)))
rows = [json.loads(l) for l in open(f"{merged}/results.jsonl")]
assert len(rows) == len({r["run_id"] for r in rows}) == 48, len(rows)
passed = collections.Counter(r["candidate"]["id"] for r in rows if r["verdict"] == "passed")
assert dict(passed) == {"oracle": 12, "scripted": 6, "loop": 6}, passed
summary = json.load(open(f"{merged}/summary.json"))
assert summary["runs"] == {"total": 48, "errors": 0}, summary["runs"]
PY
grep -q "Partial" "$M/report.md" && fail "the complete merge's report still says runs are missing"
# The merged directory holds the shards' kept final states (objects/ brought with the runs):
# every run graded again from it gives its verdict again.
[ -n "$(find "$M/objects/sha256" -type f | head -1)" ] || fail "the merge brought no objects"
regrade_reproduces "$M"
# Merging the same shards again after that changes nothing: the merged runs' newer gradings
# stay (a shard's record of a run is its first grading, not a conflicting record).
"$EVALBOX" merge "$R"/shards/* --into "$M" >"$WORK/m4.out" 2>"$WORK/m4.err" ||
  { cat "$WORK/m4.err" >&2; fail "merging again after a regrade"; }
python3 -c "$(cat <<'PY'
import json, sys
newest = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    newest[r["run_id"]] = r
assert len(newest) == 48 and all("regraded" in r for r in newest.values()), len(newest)
PY
)" "$M/results.jsonl" || fail "a merge after a regrade lost the newer gradings"
# The other way round: a shard graded again after it was merged brings its newer gradings.
M2=$WORK/merged2
"$EVALBOX" merge "$R"/shards/* --into "$M2" >/dev/null 2>"$WORK/m5.err" || { cat "$WORK/m5.err" >&2; fail "merge into $M2"; }
"$EVALBOX" regrade "$R/shards/0" --all >/dev/null 2>"$WORK/rg0.err" || { cat "$WORK/rg0.err" >&2; fail "regrade shard 0"; }
"$EVALBOX" merge "$R"/shards/* --into "$M2" >/dev/null 2>"$WORK/m6.err" ||
  { cat "$WORK/m6.err" >&2; fail "merging a shard graded again"; }
python3 - "$M2/results.jsonl" "$R/shards/0/results.jsonl" <<'PY' || fail "the shard's newer gradings were not merged"
import json, sys
def newest(f):
    out = {}
    for line in open(f):
        r = json.loads(line)
        out[r["run_id"]] = r
    return out
merged, shard = newest(sys.argv[1]), newest(sys.argv[2])
assert len(merged) == 48, len(merged)
for rid in shard:
    assert "regraded" in merged[rid], rid
assert sum("regraded" in r for r in merged.values()) == len(shard), "only shard 0's runs"
PY
R=$M no_residue
echo "shard killed, reported missing, requeued, merged and graded again: ok ($before of 16 recorded before the kill)"
