# Caches in the real sandbox: `evalbox run` warms a fixture's cache (its warm commands see the
# fixture's workspace) and a suite's (with a context directory) once, and every run sees them at
# their targets — below the home too — while a run's writes there reach neither the store nor
# the next run. `cache warm` finds them stored; a changed workspace makes a new key; a warm
# command that fails, or fills more than max_bytes, stores nothing and shows its output; `cache
# ls`, `cache rm` (by name, refused for an unknown one) and `gc` (a crashed store's leftover).
# Then two warmers of one key, --force, a held cache, Ctrl-C, and a cache in an image's home.
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

# Two warmers of one key warm it once: the second waits for the first's lock and finds it
# stored. --force fills it again in place (one key, new contents); while a suite holds it
# (its shared lock on the tree), --force (before it warms) and rm are refused and it is kept. Ctrl-C during a
# warm exits 130 and stores nothing.
mkdir -p "$S/slow/workspace"
cat > "$S/slow/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: slow
prompt: p
caches:
  slow: {target: /home/agent/.cache/slow, warm: ["sleep 1", "date +%s%N > /home/agent/.cache/slow/stamp"]}
  hang: {target: /opt/hang, warm: ["echo hanging-now", "sleep 60"]}
checks:
  - {id: a, shell: "true"}
YAML
sed 's/^name: bad$/name: slow/; s/fixtures: \[bad\]/fixtures: [slow]/' "$S/bad.yaml" > "$S/slow.yaml"
"$EVALBOX" cache warm "$S/slow.yaml" --cache slow > "$WORK/out11a" 2> "$WORK/err11a" & w1=$!
"$EVALBOX" cache warm "$S/slow.yaml" --cache slow > "$WORK/out11b" 2> "$WORK/err11b" & w2=$!
wait $w1 || { cat "$WORK/err11a"; fail "the first concurrent warm"; }
wait $w2 || { cat "$WORK/err11b"; fail "the second concurrent warm"; }
[ "$(cat "$WORK/err11a" "$WORK/err11b" | grep -c '1 cache(s) ready, 1 warmed now')" = 1 ] &&
  [ "$(cat "$WORK/err11a" "$WORK/err11b" | grep -c '1 cache(s) ready, 0 warmed now')" = 1 ] ||
  { cat "$WORK/err11a" "$WORK/err11b"; fail "two warmers of one key must warm it once"; }
slow_tree() {
  "$EVALBOX" cache ls --json | python3 -c '
import json, sys
t = [c["tree"] for c in json.load(sys.stdin)["caches"] if c["name"] == "slow"]
assert len(t) == 1, t
print(t[0])'
}
tree=$(slow_tree) || fail "one key of slow"
stamp=$(cat "$tree/stamp")
expect_exit 0 "cache warm --force" "$WORK/out12" "$WORK/err12" \
  "$EVALBOX" cache warm "$S/slow.yaml" --cache slow --force
grep -q "1 cache(s) ready, 1 warmed now" "$WORK/err12" || { cat "$WORK/err12"; fail "--force"; }
tree=$(slow_tree) || fail "--force must keep one key"
[ "$(cat "$tree/stamp")" != "$stamp" ] || fail "--force did not fill the cache again"
stamp=$(cat "$tree/stamp")
exec 8<"$tree"
flock -s 8  # as a running suite holds it
rc=0
"$EVALBOX" cache warm "$S/slow.yaml" --cache slow --force > "$WORK/out13" 2> "$WORK/err13" || rc=$?
[ "$rc" != 0 ] && grep -q "in use by a running suite: warm it again with --force" "$WORK/err13" ||
  { cat "$WORK/err13"; fail "--force of a held cache: exit $rc"; }
# Refused before its commands ran: nothing was warmed.
! grep -q "warming cache slow" "$WORK/err13" || { cat "$WORK/err13"; fail "--force warmed a held cache"; }
rc=0
"$EVALBOX" cache rm slow > "$WORK/out14" 2> "$WORK/err14" || rc=$?
[ "$rc" != 0 ] || fail "cache rm of a held cache succeeded"
exec 8<&-
[ "$(cat "$(slow_tree)/stamp")" = "$stamp" ] || fail "a held cache was changed"
"$EVALBOX" cache warm "$S/slow.yaml" --cache hang > "$WORK/out15" 2> "$WORK/err15" & warmer=$!
for _ in $(seq 100); do grep -q "warming cache hang" "$WORK/err15" && break; sleep 0.1; done
sleep 0.5
kill -INT $warmer
rc=0
wait $warmer || rc=$?
[ "$rc" = 130 ] || { cat "$WORK/err15"; fail "Ctrl-C during a warm: exit $rc, expected 130"; }
"$EVALBOX" cache ls --json | grep -q '"name": "hang"' && fail "a cancelled warm stored its cache"
! ls -a "$EVALBOX_STATE_DIR/caches" | grep -q '^\.tmp-' || fail "a cancelled warm left a temporary"
expect_exit 0 "cache rm --all, again" "$WORK/out16" "$WORK/err16" "$EVALBOX" cache rm --all

# A cache below the home of an image's root: warmed in the image, seen by its runs.
BB=$("$SRC/tests/images/make-images" busybox)
mkdir -p "$S/img/workspace"
cat > "$S/img/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: img
prompt: p
environment: {image: "oci:$BB/oci:latest"}
caches:
  gems: {target: /home/agent/.cache/gems, warm: "grep ^ID= /etc/os-release > /home/agent/.cache/gems/from"}
checks:
  - {id: saw, file: {path: seen.txt, contains: "ID=evalbox-busybox"}}
YAML
cat > "$S/img.yaml" <<'YAML'
schema: evalbox.suite.v1
name: img
fixtures: [img]
candidates:
  - {id: agent, adapter: command, transcript: none, argv: [sh, -c, "cat /home/agent/.cache/gems/from > seen.txt"]}
YAML
expect_exit 0 "a run in an image with a cache below its home" "$WORK/out17" "$WORK/err17" \
  "$EVALBOX" run "$S/img.yaml" --results "$WORK/r-img"
grep -q '"verdict": *"passed"' "$WORK/r-img/results.jsonl" || { cat "$WORK/r-img/results.jsonl"; fail "image cache"; }
expect_exit 0 "cache rm --all, at the end" "$WORK/out18" "$WORK/err18" "$EVALBOX" cache rm --all
no_residue
echo "caches: ok"
