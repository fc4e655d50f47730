# Caches in the real sandbox: `evalbox run` warms a fixture's cache (its warm commands see the
# fixture's workspace) and a suite's (with a context directory) once, and every run sees them at
# their targets — below the home too — while a run's writes there reach neither the store nor
# the next run. `cache warm` finds them stored; a changed workspace makes a new key; a warm
# command that fails, or fills more than max_bytes, stores nothing and shows its output; `cache
# ls`, `cache rm` (by name, refused for an unknown one) and `gc` (a crashed store's leftover).
source "$(dirname "$0")/lib.sh"
need_isolation
S=$WORK/s
mkdir -p "$S/deps/workspace" "$S/ctx"
printf 'alpha\nbeta\n' > "$S/deps/workspace/requirements.txt"
echo "tool v1" > "$S/ctx/tool.txt"
cat > "$S/deps/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: deps
prompt: use the cached wheels
caches:
  deps:
    target: /home/agent/.cache/deps
    warm:
      - for p in $(cat requirements.txt); do echo "wheel of $p" > /home/agent/.cache/deps/$p.whl; done
      - pwd > /home/agent/.cache/deps/warmed-in
checks:
  - {id: saw-alpha, file: {path: seen.txt, contains: alpha.whl}}
  - {id: saw-tool, file: {path: seen.txt, contains: "tool v1"}}
YAML
cat > "$S/suite.yaml" <<'YAML'
schema: evalbox.suite.v1
name: caches
fixtures: [deps]
caches:
  tools:
    target: /opt/tools
    context: ctx
    warm: cp tool.txt /opt/tools/tool.txt
candidates:
  - id: agent
    adapter: command
    transcript: none
    argv:
      - sh
      - -c
      - |
        set -e
        test ! -e /home/agent/.cache/deps/run-wrote.txt || { echo "saw another run's write"; exit 3; }
        ls /home/agent/.cache/deps > seen.txt
        cat /opt/tools/tool.txt >> seen.txt
        echo "from a run" > /home/agent/.cache/deps/run-wrote.txt
        echo tampered >> /home/agent/.cache/deps/alpha.whl
        echo tampered > /opt/tools/tool.txt
trials: 2
concurrency: 1
YAML

expect_exit 0 "a run that warms its caches" "$WORK/out1" "$WORK/err1" \
  "$EVALBOX" run "$S/suite.yaml" --results "$WORK/r1"
grep -q "warming cache deps for fixture deps" "$WORK/err1" || { cat "$WORK/err1"; fail "no warm said"; }
grep -q "warming cache tools" "$WORK/err1" || fail "the suite's cache was not warmed"
python3 - "$WORK/r1" <<'PY' || fail "run.json / verdicts"
import json, os, sys
root = sys.argv[1]
recs = [json.loads(l) for l in open(os.path.join(root, "results.jsonl"))]
assert len(recs) == 2, recs
for r in recs:
    assert r["verdict"] == "passed", (r["verdict"], r["execution"])
    run = json.load(open(os.path.join(root, "runs", r["run_id"], "run.json")))
    caches = {c["name"]: c for c in run["caches"]}
    assert set(caches) == {"deps", "tools"}, run["caches"]
    for c in caches.values():
        assert len(c["key"]) == 64 and c["digest"].startswith("sha256:"), c
    assert caches["deps"]["target"] == "/home/agent/.cache/deps"
PY
"$EVALBOX" cache ls --json > "$WORK/ls1.json" || fail "cache ls --json"
read -r deps_tree tools_tree <<<"$(python3 - "$WORK/ls1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "evalbox.cache-list.v1", j
by = {c["name"]: c for c in j["caches"]}
assert set(by) == {"deps", "tools"}, j
print(by["deps"]["tree"], by["tools"]["tree"])
PY
)"
[ "$(cat "$deps_tree/alpha.whl")" = "wheel of alpha" ] || fail "a run's write reached the stored cache"
[ ! -e "$deps_tree/run-wrote.txt" ] || fail "a run's new file reached the stored cache"
[ "$(cat "$deps_tree/warmed-in")" = /workspace ] || fail "warm commands ran in $(cat "$deps_tree/warmed-in")"
[ "$(cat "$tools_tree/tool.txt")" = "tool v1" ] || fail "the suite's cache was changed by a run"

expect_exit 0 "cache warm with everything stored" "$WORK/out2" "$WORK/err2" \
  "$EVALBOX" cache warm "$S/suite.yaml"
grep -q "2 cache(s) ready, 0 warmed now" "$WORK/err2" || { cat "$WORK/err2"; fail "warmed again"; }
grep -q " deps  /home/agent/.cache/deps" "$WORK/out2" || { cat "$WORK/out2"; fail "cache warm lists"; }

# A changed workspace is another key: warmed again, the old entry kept.
echo gamma >> "$S/deps/workspace/requirements.txt"
expect_exit 0 "cache warm after the workspace changed" "$WORK/out3" "$WORK/err3" \
  "$EVALBOX" cache warm "$S/suite.yaml" --cache deps
grep -q "1 cache(s) ready, 1 warmed now" "$WORK/err3" || { cat "$WORK/err3"; fail "not warmed anew"; }
[ "$("$EVALBOX" cache ls | grep -c ' deps ')" = 2 ] || fail "two keys of deps expected"

expect_exit 64 "an unknown --cache" "$WORK/out4" "$WORK/err4" \
  "$EVALBOX" cache warm "$S/suite.yaml" --cache nope
grep -q "names a cache nope (it names: deps, tools)" "$WORK/err4" || { cat "$WORK/err4"; fail "unknown cache"; }

# A warm command that fails stores nothing and shows the end of its output; so does one that
# fills more than max_bytes.
mkdir -p "$S/bad/workspace"
cat > "$S/bad/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: bad
prompt: p
caches:
  broken: {target: /opt/broken, warm: ["echo boom-output-line", "exit 7"]}
  big: {target: /opt/big, max_bytes: 1MiB, warm: "head -c 4194304 /dev/zero > /opt/big/blob"}
checks:
  - {id: a, shell: "true"}
YAML
cat > "$S/bad.yaml" <<'YAML'
schema: evalbox.suite.v1
name: bad
fixtures: [bad]
candidates:
  - {id: noop, adapter: noop}
YAML
before=$("$EVALBOX" cache ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["caches"]))')
expect_exit 64 "a failing warm command" "$WORK/out5" "$WORK/err5" \
  "$EVALBOX" cache warm "$S/bad.yaml" --cache broken
grep -q "exited with status 7" "$WORK/err5" || { cat "$WORK/err5"; fail "no status"; }
grep -q "boom-output-line" "$WORK/err5" || { cat "$WORK/err5"; fail "no output shown"; }
grep -q "nothing was stored" "$WORK/err5" || fail "must say nothing was stored"
expect_exit 64 "a warm past max_bytes" "$WORK/out6" "$WORK/err6" \
  "$EVALBOX" cache warm "$S/bad.yaml" --cache big
grep -q "max_bytes" "$WORK/err6" || { cat "$WORK/err6"; fail "the cap must be named"; }
after=$("$EVALBOX" cache ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["caches"]))')
[ "$before" = "$after" ] || fail "a failed warm stored something ($before -> $after)"
! ls -a "$EVALBOX_STATE_DIR/caches" | grep -q '^\.tmp-' || fail "a failed warm left a temporary"
expect_exit 64 "a run whose cache cannot be warmed" "$WORK/out7" "$WORK/err7" \
  "$EVALBOX" run "$S/bad.yaml" --results "$WORK/r-bad"
grep -q "boom-output-line" "$WORK/err7" || { cat "$WORK/err7"; fail "run: warm output not shown"; }
[ ! -e "$WORK/r-bad/results.jsonl" ] || [ ! -s "$WORK/r-bad/results.jsonl" ] || fail "runs were recorded"

# rm by name removes every key of it; an unknown name is a usage error; gc collects leftovers.
expect_exit 0 "cache rm deps" "$WORK/out8" "$WORK/err8" "$EVALBOX" cache rm deps
[ "$(grep -c '^removed ' "$WORK/out8")" = 2 ] || { cat "$WORK/out8"; fail "both deps keys"; }
"$EVALBOX" cache ls | grep -q ' deps ' && fail "deps still listed"
"$EVALBOX" cache ls | grep -q ' tools ' || fail "tools was removed too"
expect_exit 64 "cache rm of nothing" "$WORK/out9" "$WORK/err9" "$EVALBOX" cache rm nosuchcache
mkdir -p "$EVALBOX_STATE_DIR/caches/.tmp-0123456789abcdef-999999999-0/tree"
"$EVALBOX" gc > "$WORK/gc.txt" 2>&1 || { cat "$WORK/gc.txt"; fail "gc"; }
grep -Eq "caches and bundles: [1-9][0-9]* half-stored" "$WORK/gc.txt" ||
  { cat "$WORK/gc.txt"; fail "gc: caches"; }
! ls -a "$EVALBOX_STATE_DIR/caches" | grep -q '^\.warm-' || fail "gc left a free warm lock"
[ ! -e "$EVALBOX_STATE_DIR/caches/.tmp-0123456789abcdef-999999999-0" ] || fail "gc left it"
expect_exit 0 "cache rm --all" "$WORK/out10" "$WORK/err10" "$EVALBOX" cache rm --all
no_residue
echo "caches: ok"
