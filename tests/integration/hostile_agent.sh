# What an agent writes cannot crash, stall or fool the harness, end to end (docs/reliability.md):
#  - regex checks over a megabyte of "abab...c" (std::regex overflowed the stack on it and took
#    the whole `evalbox run` down) in a file, a command and the final message;
#  - an OOM kill of a child (bash -> python3 touching up to 1 GiB under a 256 MiB limit, with
#    `ulimit -v` as a second fence) is outcome oom_killed, though bash outlived it;
#  - bytes that are not UTF-8 in the agent's events and in a file name: the events are kept,
#    the diff names the file;
#  - a workspace file past the read cap fails its check with a message that says so.
source "$(dirname "$0")/lib.sh"
need_isolation
S=$WORK/s
mkdir -p "$S/agents"
mk_fixture() {  # NAME PROMPT LIMITS THRESHOLD CHECKS...
  local name=$1 prompt=$2 limits=$3 threshold=$4
  shift 4
  mkdir -p "$S/$name/workspace"
  echo "seed" > "$S/$name/workspace/seed.txt"
  {
    echo "schema: evalbox.fixture.v1"
    echo "id: $name"
    echo "prompt: \"$prompt\""
    echo "limits: $limits"
    echo "threshold: $threshold"
    echo "checks:"
    for c in "$@"; do echo "  - $c"; done
  } > "$S/$name/fixture.yaml"
}
mk_fixture regex "regex: write big.txt" "{output: 16MiB}" 0.7 \
  '{id: file, weight: 4, file: {path: big.txt, matches: "(a|b)*c"}}' \
  '{id: command, transcript: {command_matches: "^(a|b)*c$"}}' \
  '{id: final, transcript: {final_message_matches: "(a|b)*c"}}' \
  '{id: forbid, transcript: {forbid_command: "(a|b)*d"}}'
# The reference solution writes the file too (evalbox fixture test runs it as the agent).
mkdir -p "$S/regex/solution"
cat > "$S/regex/solution/solve.sh" <<'SH'
python3 -c 'open("big.txt", "w").write("ab" * (1 << 19) + "c\n")'
SH
mk_fixture oom "oom: touch a gigabyte" "{memory: 256MiB}" 1 \
  '{id: survived, file: {path: after.txt, exists: true}}'
mk_fixture bytes "bytes: write a name that is not UTF-8" "{}" 1 \
  '{id: said-done, transcript: {final_message_matches: "^done"}}'
mk_fixture bigfile "bigfile: write 65 MiB" "{disk: 256MiB}" 1 \
  '{id: read-it, file: {path: out.bin, contains: "x"}}'

cat > "$S/agents/hostile.sh" <<'SH'
#!/bin/bash
# Does what the prompt names, printing evalbox.events.v1 lines.
case "$EVALBOX_PROMPT" in
  regex*)
    python3 - <<'PY'
import json
abab = "ab" * (1 << 19) + "c"
open("big.txt", "w").write(abab + "\n")
print(json.dumps({"type": "header", "schema": "evalbox.events.v1"}))
print(json.dumps({"type": "tool_call", "id": "c1", "tool": "shell", "input": {"command": abab}}))
print(json.dumps({"type": "final", "text": abab}))
PY
    ;;
  oom*)
    # The second fence: 1.5 GiB of address space for bash and python3 alike.
    ulimit -v $((1536 * 1024))
    python3 -c '
chunks = []
for i in range(64):
    chunks.append(b"\x01" * (16 << 20))  # written, so resident: 1 GiB in all
print("python3 touched", len(chunks) * 16, "MiB")'
    rc=$?
    echo "python3 exited $rc" > after.txt
    exit $rc
    ;;
  bytes*)
    echo hello > "$(printf 'bad-\377-name.txt')"
    printf '{"type":"header","schema":"evalbox.events.v1"}\n'
    printf '{"type":"message","role":"assistant","text":"writing bad-\377-name.txt"}\n'
    printf '{"type":"final","text":"done: bad-\377-name.txt"}\n'
    ;;
  bigfile*)
    head -c $((65 << 20)) /dev/zero > out.bin
    printf '{"type":"header","schema":"evalbox.events.v1"}\n{"type":"final","text":"ok"}\n'
    ;;
esac
SH
chmod +x "$S/agents/hostile.sh"
cat > "$S/suite.yaml" <<'YAML'
schema: evalbox.suite.v1
name: hostile
fixtures: [regex, oom, bytes, bigfile]
candidates:
  - {id: hostile, adapter: command, argv: [agents/hostile.sh], transcript: jsonl}
concurrency: 2
limits: {wall: 2m, memory: 1GiB, pids: 256, disk: 64MiB, output: 4MiB}
YAML

# The regex fixture is trusted: its solution passes, the untouched workspace fails.
"$EVALBOX" fixture test "$S/regex" >"$WORK/fixture-test.out" 2>&1 ||
  { cat "$WORK/fixture-test.out"; fail "evalbox fixture test on the regex fixture"; }

R=$WORK/results
set +e
"$EVALBOX" run "$S/suite.yaml" --results "$R" --retries 0 >"$WORK/run.out" 2>"$WORK/err"
rc=$?
set -e
# bigfile's check fails (a task failure): exit 1, every run recorded and graded.
[ "$rc" = 1 ] || { cat "$WORK/err" "$WORK/run.out"; fail "evalbox run exited $rc, expected 1"; }
python3 - "$R" <<'PY' || fail "the records say something else (above)"
import json, os, sys
root = sys.argv[1]
runs = {}
for line in open(os.path.join(root, "results.jsonl"), "rb"):
    r = json.loads(line)
    runs[r["fixture"]["id"]] = r
assert set(runs) == {"regex", "oom", "bytes", "bigfile"}, runs.keys()
def checks(r):
    return {c["id"]: c for c in r["grading"]["checks"]}
for name, r in runs.items():
    assert r["execution"]["status"] == "completed", (name, r["execution"])
    assert r["grading"]["status"] == "completed", (name, r["grading"])

r = runs["regex"]
assert r["verdict"] == "passed", r["grading"]
assert all(c["passed"] for c in checks(r).values()), checks(r)

r = runs["oom"]
agent = r["execution"]["records"]["agent"]
assert r["execution"]["outcome"] == "oom_killed", r["execution"]
assert agent["outcome"] == "oom_killed" and agent["oom_kills"] >= 1, agent
assert agent["exit_code"] is None, agent
assert agent["peak_memory_bytes"] <= 256 << 20, agent
assert checks(r)["survived"]["passed"], "bash outlived python3 and wrote after.txt"
assert r["verdict"] == "passed", r["grading"]

r = runs["bytes"]
assert r["verdict"] == "passed", r["grading"]
d = os.path.join(root, "runs", r["run_id"])
t = [json.loads(l) for l in open(os.path.join(d, "transcript.jsonl"), "rb")]
summary = t[-1]
assert summary["final_message"] == "done: bad-\ufffd-name.txt", summary
assert summary["malformed_lines"] == 0, summary
diff = open(os.path.join(d, "workspace.diff"), "rb").read()
assert b"b/bad-\xff-name.txt" in diff and b"+hello" in diff, diff
log = os.path.join(d, "diff.log")
assert not os.path.exists(log) or b"No such file" not in open(log, "rb").read(), open(log, "rb").read()

r = runs["bigfile"]
assert r["verdict"] == "failed", r
detail = checks(r)["read-it"]["detail"]
assert detail == ("out.bin is 68157440 bytes, larger than 64MiB: evalbox reads at most that "
                  "of a file for a check"), detail
PY
no_residue
echo "hostile agent: ok"
