# Grading again without agents (docs/results.md, "Grading again"), as a fixture author uses it:
# a suite is run once; every graded run keeps its final state; `evalbox regrade --all`
# reproduces every verdict from the kept states alone (a fixture whose solution leaves a binary
# file, a deleted file, a symlink, a mode change, a new directory and a file where a directory
# was, checked one by one); a check's regex is then changed and `evalbox regrade` changes the
# verdicts of exactly that fixture's runs, starting no agent; the old grading stays readable
# (report --grading original, compare --grading original); `evalbox run` resumed after a
# check's change regrades instead of re-running; damaged kept states are refused, not guessed.
source "$(dirname "$0")/lib.sh"
need_isolation
S=$WORK/suite
mkdir -p "$S"
cp -r "$SRC/fixtures/examples/off-by-one" "$SRC/fixtures/examples/write-shell-script" "$S/"
mkdir -p "$S/agents"
cp "$SRC/fixtures/examples/agents/scripted-agent.sh" "$S/agents/"

# A fixture whose reference solution changes its workspace in every way a tree can change.
F=$S/state-kinds
mkdir -p "$F/workspace/old-dir" "$F/workspace/keep" "$F/solution" "$F/grader"
echo "remove me" >"$F/workspace/doomed.txt"
echo "a file in a directory that becomes a file" >"$F/workspace/old-dir/inner.txt"
echo "#!/bin/sh" >"$F/workspace/tool.sh"
chmod 0644 "$F/workspace/tool.sh"
echo "kept" >"$F/workspace/keep/same.txt"
cat >"$F/solution/solve.sh" <<'SH'
#!/bin/sh
set -e
cd /workspace
head -c 4096 /dev/urandom >blob.bin
sha256sum blob.bin | cut -d' ' -f1 >blob.sum
rm doomed.txt
ln -s keep/same.txt link-to-same
chmod 0755 tool.sh
mkdir -p new/deeper
printf 'nested\0with a NUL\n' >new/deeper/file.dat
rm -r old-dir
echo "now a file" >old-dir
SH
chmod +x "$F/solution/solve.sh"
cat >"$F/grader/check.sh" <<'SH'
#!/bin/sh
cd /workspace || exit 1
[ -f blob.bin ] && [ "$(sha256sum blob.bin | cut -d' ' -f1)" = "$(cat blob.sum)" ] || { echo blob; exit 1; }
[ ! -e doomed.txt ] || { echo doomed; exit 1; }
[ -L link-to-same ] && [ "$(readlink link-to-same)" = keep/same.txt ] || { echo link; exit 1; }
[ "$(cat link-to-same)" = kept ] || { echo through-link; exit 1; }
[ -x tool.sh ] || { echo mode; exit 1; }
[ "$(stat -c %a tool.sh)" = 755 ] || { echo mode-bits; exit 1; }
printf 'nested\0with a NUL\n' | cmp -s - new/deeper/file.dat || { echo nested; exit 1; }
[ -f old-dir ] && [ "$(cat old-dir)" = "now a file" ] || { echo dir-to-file; exit 1; }
echo all-kinds-ok
SH
cat >"$F/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: state-kinds
prompt: Change the workspace in every way.
checks:
  - {id: every-kind, shell: "sh /grader/check.sh"}
YAML

cat >"$S/suite.yaml" <<'YAML'
schema: evalbox.suite.v1
name: regrade
fixtures: ["*/"]
candidates:
  - {id: oracle, adapter: oracle}
  - {id: noop, adapter: noop}
  - id: scripted
    adapter: command
    argv: [agents/scripted-agent.sh, "{prompt}"]
    transcript: jsonl
trials: 1
concurrency: 2
limits: {wall: 2m, memory: 1GiB, pids: 256, disk: 256MiB, output: 4MiB}
baseline: noop
YAML

R=$WORK/results
expect_exit 1 "first run" "$WORK/out" "$WORK/err" "$EVALBOX" run "$S/suite.yaml" --results "$R"
verdicts() {  # fixture/candidate verdict, of the newest record of each run
  python3 - "$1" <<'PY'
import json, sys
newest = {}
for line in open(f"{sys.argv[1]}/results.jsonl"):
    r = json.loads(line)
    newest[r["run_id"]] = r
for r in sorted(newest.values(), key=lambda r: (r["fixture"]["id"], r["candidate"]["id"])):
    print(f'{r["fixture"]["id"]}/{r["candidate"]["id"]} {r["verdict"]}')
PY
}
verdicts "$R" >"$WORK/v0"
grep -qx "state-kinds/oracle passed" "$WORK/v0" || fail "the state-kinds oracle: $(cat "$WORK/v0")"
grep -qx "state-kinds/noop failed" "$WORK/v0" || fail "the state-kinds noop: $(cat "$WORK/v0")"
python3 - "$R" <<'PY'
import json, os, sys
R = sys.argv[1]
for line in open(f"{R}/results.jsonl"):
    r = json.loads(line)
    fs = r["final_state"]
    assert fs and fs["path"] == f"runs/{r['run_id']}/final-state.json", fs
    assert os.path.isfile(os.path.join(R, fs["path"])), fs
    assert len(r["grading"]["digest"]) == 64, r["grading"]
    assert len(r["fixture"]["task_digest"]) == 64, r["fixture"]
# The oracle's state names each kind of change.
for line in open(f"{R}/results.jsonl"):
    r = json.loads(line)
    if (r["fixture"]["id"], r["candidate"]["id"]) != ("state-kinds", "oracle"):
        continue
    m = json.load(open(os.path.join(R, r["final_state"]["path"])))
    ws = {e["path"]: e for t in m["trees"] if t["name"] == "workspace" for e in t["entries"]}
    assert ws["blob.bin"]["type"] == "file" and ws["blob.bin"]["size"] == 4096, ws["blob.bin"]
    assert ws["doomed.txt"]["type"] == "deleted", ws
    assert ws["link-to-same"] == {"path": "link-to-same", "type": "symlink",
                                  "target": "keep/same.txt"}, ws["link-to-same"]
    assert ws["tool.sh"]["mode"] == 0o755, ws["tool.sh"]
    assert ws["old-dir"]["type"] == "file", ws["old-dir"]
    assert "keep/same.txt" not in ws and "keep" not in ws, "unchanged entries are not kept"
    obj = ws["blob.bin"]["digest"]
    assert os.path.isfile(f"{R}/objects/sha256/{obj[:2]}/{obj[2:]}"), obj
PY

# Every verdict again from the kept states alone; no agent process may start meanwhile.
# (The scripted agent's script is made to fail loudly: a regrade that ran it would say so.)
mv "$S/agents/scripted-agent.sh" "$S/agents/scripted-agent.sh.away"
printf '#!/bin/sh\necho AGENT-STARTED >&2\nexit 99\n' >"$S/agents/scripted-agent.sh"
chmod +x "$S/agents/scripted-agent.sh"
before_lines=$(lines "$R/results.jsonl")
: >"$WORK/agents-seen"
# Only this test's processes: other tests may run agents meanwhile (ctest -j). An oracle's
# solve.sh runs from this suite's fixtures, whose directory its command line names.
( while [ -f "$WORK/agents-seen" ]; do
    pgrep -af "scripted-agent|solve.sh" | grep -F "$WORK/" >>"$WORK/agents-seen" 2>/dev/null || true
    sleep 0.05
  done ) &
watcher=$!
trap 'kill $watcher 2>/dev/null || true; cleanup' EXIT
expect_exit 0 "regrade --all" "$WORK/out" "$WORK/err" "$EVALBOX" regrade "$R" --all
kill "$watcher"; wait "$watcher" 2>/dev/null || true
[ -s "$WORK/agents-seen" ] && fail "an agent process ran during the regrade: $(cat "$WORK/agents-seen")"
grep -q "9 run(s) graded again (0 verdict(s) changed)" "$WORK/err" ||
  fail "regrade --all: $(cat "$WORK/err")"
verdicts "$R" >"$WORK/v1"
diff "$WORK/v0" "$WORK/v1" >&2 || fail "regrade --all changed verdicts without a change of checks"
[ "$(lines "$R/results.jsonl")" = $((before_lines + 9)) ] || fail "one new record per regraded run"
# And no regrade launched an agent: the new records' launches are graders'.
python3 - "$R/results.jsonl" "$before_lines" <<'PY' || fail "a regrade launched an agent"
import json, sys
for line in open(sys.argv[1]).readlines()[int(sys.argv[2]):]:
    r = json.loads(line)
    labels = set(r["regraded"].get("records", {}))
    assert not labels & {"agent", "follow-up", "setup"}, (r["run_id"], labels)
PY
# Nothing of the regrades' sandboxes stays.
no_residue

# A check's regex changed: only write-shell-script's runs are graded again, and its scripted
# and oracle verdicts (which never said "Done" in those words) flip.
sed -i 's/final_message_matches: "\[Dd\]one"/final_message_matches: "NEVER SAID"/; s/threshold: 0.75/threshold: 0.9/' \
  "$S/write-shell-script/fixture.yaml"
expect_exit 0 "regrade after a change" "$WORK/out" "$WORK/err" "$EVALBOX" regrade "$R"
grep -q "3 run(s) graded again" "$WORK/err" || fail "regrade: $(cat "$WORK/err")"
verdicts "$R" >"$WORK/v2"
diff "$WORK/v1" "$WORK/v2" | grep '^>' | sort >"$WORK/changed" || true
cat >"$WORK/want" <<'EOF'
> write-shell-script/oracle failed
> write-shell-script/scripted failed
EOF
diff "$WORK/want" "$WORK/changed" >&2 || fail "the verdicts that changed"
grep -q "grading:.*9 of the 9 verdicts come from grading the run again" "$WORK/out" ||
  fail "the terminal summary does not say which verdicts were graded again: $(cat "$WORK/out")"
grep -q '^\*\*Grading:\*\* 9 of the 9 verdicts come from grading the run again' "$R/report.md" ||
  fail "report.md does not say that its verdicts come from a regrade"
python3 - "$R" <<'PY'
import json, os, sys
R = sys.argv[1]
s = json.load(open(f"{R}/summary.json"))
assert s["grading"]["regraded"] == 9, s["grading"]
assert s["grading"]["mixed_fixtures"] == [], s["grading"]  # every run is at the newest now
newest = {}
for line in open(f"{R}/results.jsonl"):
    r = json.loads(line)
    newest[r["run_id"]] = r
for r in newest.values():
    if r["fixture"]["id"] != "write-shell-script":
        continue
    g = r["regraded"]
    assert g["previous_digest"] and g["previous_digest"] != r["grading"]["digest"], g
    old = os.path.join(R, "runs", r["run_id"], "gradings", g["previous_digest"] + ".json")
    assert json.load(open(old))["grading"]["digest"] == g["previous_digest"], old
    assert os.path.isfile(os.path.join(R, g["files"], "checks", "counts-correctly.log")), g
PY
# The old grading is still there to read and to compare.
expect_exit 0 "report --grading original" "$WORK/out" "$WORK/err" \
  "$EVALBOX" report "$R" --grading original
grep -q "verdicts each run gave itself" "$R/gradings/original/report.md" ||
  fail "report --grading original does not say which grading it shows"
python3 - "$R" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/gradings/original/summary.json"))
assert s["grading"]["selected"] == "original", s["grading"]
oracle = [c for c in s["candidates"] if c["candidate"] == "oracle"][0]
assert oracle["pass_at_1"]["value"] == 1.0, oracle  # as the run graded itself
PY
expect_exit 0 "compare --grading original" "$WORK/out" "$WORK/err" \
  "$EVALBOX" compare "$R" --grading original --json
python3 - "$WORK/out" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
oracle = [x for x in c["comparisons"] if x["candidate"] == "oracle"][0]
diffs = {d["fixture"]: d["difference"] for d in oracle["differences"]}
assert diffs["write-shell-script"] == -1.0, diffs
assert all(v == 0 for k, v in diffs.items() if k != "write-shell-script"), diffs
PY
expect_exit 64 "an unknown grading" "$WORK/out" "$WORK/err" "$EVALBOX" report "$R" --grading deadbeefdead
grep -q "no such grading" "$WORK/err" || fail "report --grading: $(cat "$WORK/err")"

# Resume after a check's change grades again, runs no agent (the scripted agent is still the
# one that fails loudly: a re-run would record its exit 99).
sed -i 's/NEVER SAID/\[Dd\]one/' "$S/write-shell-script/fixture.yaml"
set +e
"$EVALBOX" run "$S/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
set -e
grep -q "3 recorded run(s) graded again" "$WORK/err" || fail "resume did not regrade: $(cat "$WORK/err")"
grep -q "write-shell-script/oracle#0: .* (graded again)" "$WORK/err" || fail "resume: $(cat "$WORK/err")"
python3 - "$R" <<'PY'
import json, sys
newest = {}
for line in open(f"{sys.argv[1]}/results.jsonl"):
    r = json.loads(line)
    newest[r["run_id"]] = r
assert len(newest) == 9, len(newest)
for r in newest.values():
    assert "regraded" in r, r["run_id"]
    assert r["execution"]["status"] == "completed", r["execution"]
PY
mv "$S/agents/scripted-agent.sh.away" "$S/agents/scripted-agent.sh"

# A damaged kept state is refused with the reason; the run keeps its grading.
id=$(python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if (r["fixture"]["id"], r["candidate"]["id"]) == ("state-kinds", "oracle"):
        print(r["run_id"]); break' "$R/results.jsonl")
obj=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print([e for t in m["trees"] for e in t["entries"] if e["path"] == "blob.bin"][0]["digest"])' \
  "$R/runs/$id/final-state.json")
chmod u+w "$R/objects/sha256/${obj:0:2}/${obj:2}"
echo tampered >"$R/objects/sha256/${obj:0:2}/${obj:2}"
expect_exit 3 "regrade of a damaged state" "$WORK/out" "$WORK/err" \
  "$EVALBOX" regrade "$R" --all --fixture state-kinds --candidate oracle
grep -q "does not hold the bytes of its digest" "$WORK/err" || fail "damaged object: $(cat "$WORK/err")"
cp "$R/runs/$id/final-state.json" "$WORK/manifest"
python3 - "$R/runs/$id/final-state.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["trees"][0]["entries"].append({"path": "../../escape", "type": "file", "mode": 420,
                                 "size": 1, "digest": "0" * 64})
json.dump(m, open(sys.argv[1], "w"))
PY
expect_exit 3 "regrade of an edited manifest" "$WORK/out" "$WORK/err" \
  "$EVALBOX" regrade "$R" --all --fixture state-kinds --candidate oracle
grep -q "the path '../../escape'" "$WORK/err" || fail "edited manifest: $(cat "$WORK/err")"
# A run that kept no final state (--final-state-size 0: as results from before evalbox kept
# one) is reported when its checks change, never guessed: its verdict stays, and both regrade
# and a resumed run name it.
R0=$WORK/no-state
expect_exit 0 "a run keeping no state" "$WORK/out" "$WORK/err" \
  "$EVALBOX" run "$S/suite.yaml" --results "$R0" --filter 'state-kinds/oracle' --final-state-size 0
python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); assert r["final_state"] is None, r["final_state"]' \
  "$R0/results.jsonl" || fail "--final-state-size 0 kept a state"
sed -i 's|shell: "sh /grader/check.sh"|shell: "sh /grader/check.sh \&\& true"|' "$F/fixture.yaml"
expect_exit 0 "regrade of a run without state" "$WORK/out" "$WORK/err" "$EVALBOX" regrade "$R0"
grep -q "1 run(s) were graded by other checks but kept no final state" "$WORK/err" ||
  fail "regrade does not report the run it cannot grade again: $(cat "$WORK/err")"
grep -q "0 run(s) graded again" "$WORK/err" || fail "regrade graded a run without state"
[ "$(lines "$R0/results.jsonl")" = 1 ] || fail "a record was written for a run without state"
expect_exit 0 "resume of a run without state" "$WORK/out" "$WORK/err" \
  "$EVALBOX" run "$S/suite.yaml" --results "$R0" --filter 'state-kinds/oracle'
grep -q "kept no final state" "$WORK/err" || fail "resume does not report it: $(cat "$WORK/err")"
[ "$(lines "$R0/results.jsonl")" = 1 ] || fail "resume re-ran or regraded a run without state"
# The task itself changed (its prompt): the run is no run of the suite as it is now, and regrade
# says so instead of grading nothing in silence.
sed -i 's|^prompt: Change the workspace in every way.|prompt: Change the workspace in every way, please.|' \
  "$F/fixture.yaml"
expect_exit 0 "regrade after the task changed" "$WORK/out" "$WORK/err" "$EVALBOX" regrade "$R0" --all
grep -q "1 recorded run(s) in $R0 are not runs of the suite as it is now" "$WORK/err" ||
  fail "regrade does not name the runs of a changed task: $(cat "$WORK/err")"
[ "$(lines "$R0/results.jsonl")" = 1 ] || fail "a run of a changed task was graded again"
expect_exit 64 "an unknown fixture" "$WORK/out" "$WORK/err" "$EVALBOX" regrade "$R" --fixture nope
grep -q "no such fixture" "$WORK/err" || fail "--fixture nope: $(cat "$WORK/err")"
no_residue
echo "ok: regrade"
