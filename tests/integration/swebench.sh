# SWE-bench-style instances end to end, offline: a tiny Python project in a local git
# repository, instances over it, `evalbox import swebench`, then `evalbox validate` (a commit
# that does not exist is an error at its line), `evalbox fixture test` (the gold patch passes,
# the untouched workspace fails) and `evalbox run` with an agent that fixes half the bug
# (partial resolution) and one that edits the tests it must not (the real tests still apply).
source "$(dirname "$0")/lib.sh"
need_isolation
python3 -c 'import pytest' 2>/dev/null || /usr/bin/python3 -c 'import pytest' ||
  fail "pytest is not installed (scripts/bootstrap --tests installs python3-pytest)"

# The upstream repository: add() is wrong for negative numbers only after the "bug" commit.
up=$WORK/repos/acme/calc
mkdir -p "$up/tests"
git init -q "$up"
cat > "$up/calc.py" <<'PY'
def add(a, b):
    return abs(a) + abs(b)


def sub(a, b):
    return a - b
PY
cat > "$up/tests/test_calc.py" <<'PY'
from calc import sub


def test_sub():
    assert sub(5, 3) == 2
PY
git -C "$up" add -A
git -C "$up" -c user.name=t -c user.email=t@localhost commit -qm base
base=$(git -C "$up" rev-parse HEAD)

# The tests the fix must make pass (FAIL_TO_PASS) and the one it must keep passing.
test_patch=$(cat <<'DIFF'
diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,5 +1,13 @@
-from calc import sub
+from calc import add, sub
 
 
 def test_sub():
     assert sub(5, 3) == 2
+
+
+def test_add_negative():
+    assert add(-1, -2) == -3
+
+
+def test_add_mixed():
+    assert add(-1, 2) == 1
DIFF
)
gold=$(cat <<'DIFF'
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,5 +1,5 @@
 def add(a, b):
-    return abs(a) + abs(b)
+    return a + b
 
 
 def sub(a, b):
DIFF
)
python3 - "$WORK" "$base" "$test_patch" "$gold" <<'PY'
import json, sys
work, base, test_patch, gold = sys.argv[1:]
inst = {"instance_id": "acme__calc-7", "repo": "acme/calc", "base_commit": base,
        "problem_statement": "add() is wrong when a number is negative: add(-1, -2) gives 3.\n",
        "test_patch": test_patch + "\n", "patch": gold + "\n",
        # As in SWE-bench's files: JSON lists encoded as strings.
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add_negative",
                                    "tests/test_calc.py::test_add_mixed"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_sub"]),
        "version": "1.0", "created_at": "2024-01-01T00:00:00Z"}
with open(work + "/instances.jsonl", "w") as f:
    f.write(json.dumps(inst) + "\n")
bad = dict(inst, instance_id="acme__calc-8", base_commit="e" * 40)
with open(work + "/bad.jsonl", "w") as f:
    f.write(json.dumps(bad) + "\n")
PY

# Import: a suite and one fixture per instance; nothing fetched yet.
"$EVALBOX" import swebench "$WORK/instances.jsonl" --out "$WORK/suite" --repos "$WORK/repos" \
  --quiet >"$WORK/import.out" 2>"$WORK/err" || { cat "$WORK/err"; fail "import failed"; }
grep -q "imported 1 instance" "$WORK/import.out" || fail "import said: $(cat "$WORK/import.out")"
fx=$WORK/suite/acme__calc-7
[ -f "$fx/fixture.yaml" ] && [ -f "$fx/grader/test.patch" ] && [ -x "$fx/solution/solve.sh" ] ||
  fail "the fixture's files are missing: $(find "$fx")"
[ -f "$WORK/suite/suite.yaml" ] || fail "no suite.yaml"

# validate fetches the repository into the state dir's mirror and checks the commit out once.
"$EVALBOX" validate "$WORK/suite/suite.yaml" >"$WORK/validate.out" 2>&1 ||
  { cat "$WORK/validate.out"; fail "validate refused the imported suite"; }
[ -d "$EVALBOX_STATE_DIR/workspace-sources/git/$base" ] || fail "no checked-out tree for $base"
ls "$EVALBOX_STATE_DIR"/git/mirrors/*.git >/dev/null || fail "no mirror"

# A commit the repository does not have: exit 64, the fixture file and line, what to do.
"$EVALBOX" import swebench "$WORK/bad.jsonl" --out "$WORK/bad" --repos "$WORK/repos" --quiet \
  >/dev/null 2>&1 || fail "importing the bad-commit instance failed (validate is what checks it)"
rc=0
"$EVALBOX" validate "$WORK/bad/acme__calc-8" >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 64 ] || { cat "$WORK/bad.out"; fail "validate of a bad commit exited $rc, not 64"; }
grep -Eq "acme__calc-8/fixture.yaml:[0-9]+:[0-9]+: workspace.commit: commit eeeeeee+ is not in" \
  "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the bad commit's error does not say where"; }
grep -q "hint:" "$WORK/bad.out" || fail "the bad commit's error says nothing to do"

# fixture test: the gold patch (the oracle) passes, the untouched repository fails.
"$EVALBOX" fixture test "$fx" --results "$WORK/ft" >"$WORK/ft.out" 2>&1 ||
  { cat "$WORK/ft.out"; fail "fixture test rejected the imported instance"; }

# Two agents beside gold and noop: one fixes positive-plus-negative only (one of the two
# FAIL_TO_PASS tests: partial), one fixes the bug but rewrites the test file to pass trivially
# (the real tests are put back before they run).
mkdir -p "$WORK/suite/agents"
cat > "$WORK/suite/agents/half.sh" <<'SH'
#!/bin/sh
cat > calc.py <<'PY'
def add(a, b):
    if a < 0 and b < 0:
        return abs(a) + abs(b)
    return a + b


def sub(a, b):
    return a - b
PY
SH
cat > "$WORK/suite/agents/cheat.sh" <<'SH'
#!/bin/sh
sed -i 's/abs(a) + abs(b)/a + b/' calc.py
printf 'def test_sub():\n    pass\n' > tests/test_calc.py
SH
chmod +x "$WORK/suite/agents/"*.sh
# The same instance graded from a JUnit XML report instead of pytest's output.
mkdir -p "$WORK/suite/calc-junit/grader"
cp "$fx/grader/test.patch" "$WORK/suite/calc-junit/grader/"
cp -r "$fx/solution" "$WORK/suite/calc-junit/"
cat > "$WORK/suite/calc-junit/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: calc-junit
prompt: add() is wrong when a number is negative.
workspace: {git: ../../repos/acme/calc, commit: $base}
checks:
  - id: tests
    tests:
      patch: grader/test.patch
      command: python3 -m pytest -p no:cacheprovider --junitxml=.reports/junit.xml tests
      report: {junit: .reports/junit.xml}
      fail_to_pass: [tests.test_calc::test_add_negative, tests.test_calc.test_add_mixed]
      pass_to_pass: [tests.test_calc::test_sub]
YAML
python3 - "$WORK/suite/suite.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read().replace("candidates:\n", "candidates:\n"
    "  - {id: half, adapter: command, argv: [agents/half.sh]}\n"
    "  - {id: cheat, adapter: command, argv: [agents/cheat.sh]}\n")
open(p, "w").write(s + "concurrency: 2\n")
PY
R=$WORK/results
rc=0
"$EVALBOX" run "$WORK/suite/suite.yaml" --results "$R" >"$WORK/run.out" 2>"$WORK/err" || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/run.out" "$WORK/err"; fail "run exited $rc, not 1 (a task failed)"; }
python3 - "$R" <<'PY'
import json, sys
all_recs = list(map(json.loads, open(sys.argv[1] + "/results.jsonl")))
assert len(all_recs) == 8, len(all_recs)
junit = {r["candidate"]["id"]: r for r in all_recs if r["fixture"]["id"] == "calc-junit"}
recs = {r["candidate"]["id"]: r for r in all_recs if r["fixture"]["id"] == "acme__calc-7"}
assert set(recs) == set(junit) == {"gold", "noop", "half", "cheat"}, sorted(recs)
# JUnit: the same verdicts and resolutions as from pytest's output.
for c, (verdict, resolution, score) in {"gold": ("passed", "full", 1), "noop": ("failed", "none", 0),
                                        "half": ("failed", "partial", 0.5),
                                        "cheat": ("passed", "full", 1)}.items():
    t = junit[c]["grading"]["checks"][0]
    assert junit[c]["verdict"] == verdict and t["tests"]["resolution"] == resolution, (c, t)
    assert junit[c]["grading"]["score"] == score, (c, junit[c]["grading"])
def check(c):
    g = recs[c]["grading"]
    assert g["status"] == "completed", (c, g)
    (t,) = g["checks"]
    assert t["kind"] == "tests" and t["patch"] == "applied", (c, t)
    return recs[c]["verdict"], g["score"], t
v, score, t = check("gold")
assert v == "passed" and score == 1 and t["tests"]["resolution"] == "full", t
v, score, t = check("noop")
assert v == "failed" and score == 0 and t["tests"]["resolution"] == "none", t
assert [x["status"] for x in t["tests"]["fail_to_pass"]] == ["FAILED", "FAILED"], t
assert [x["status"] for x in t["tests"]["pass_to_pass"]] == ["PASSED"], t
v, score, t = check("half")
assert v == "failed" and t["tests"]["resolution"] == "partial" and score == 0.5, (score, t)
statuses = {x["id"]: x["status"] for x in t["tests"]["fail_to_pass"]}
assert statuses == {"tests/test_calc.py::test_add_negative": "FAILED",
                    "tests/test_calc.py::test_add_mixed": "PASSED"}, statuses
assert "partial: fail_to_pass 1/2 pass" in t["detail"], t["detail"]
# The cheat's own test file was replaced by the real one before the tests ran: it is graded
# on the real tests, which its (correct) fix passes.
v, score, t = check("cheat")
assert v == "passed" and t["tests"]["resolution"] == "full", t
PY
# Each run kept its test output and the patch step's log.
ls "$R"/runs/*/checks/tests.log >/dev/null || fail "no test log kept"
grep -q "short test summary info" "$R"/runs/*/checks/tests.log || fail "the log is not pytest's"
# Every verdict again from the kept final states: the test patch applied and the tests (pytest
# and JUnit) run over the rebuilt workspace, the cheat's edited test file put back again.
regrade_reproduces "$R"

# gc knows the git store: nothing partial to remove, the tree kept.
"$EVALBOX" gc --json >"$WORK/gc.json" || fail "gc failed"
python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))["git"]
assert g["trees"] >= 1 and g["mirrors"] >= 1 and g["temporaries_removed"] == 0, g' "$WORK/gc.json"
no_residue
echo "PASS: swebench"
