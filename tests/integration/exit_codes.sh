# evalbox run's exit status tells a script what happened: 64 invalid configuration (nothing
# created; a shared login credential among them), 2 an execution failed (a setup that fails), 3 a grader failed (a check that cannot
# be evaluated), 1 a check failed, 0 all passed.
source "$(dirname "$0")/lib.sh"
need_isolation
mk_fixture() {  # NAME SETUP CHECK-YAML
  mkdir -p "$WORK/s/$1/workspace"
  echo "content" > "$WORK/s/$1/workspace/file.txt"
  cat > "$WORK/s/$1/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: $1
prompt: do nothing
setup: [$2]
checks:
  - $3
YAML
}
mk_suite() {  # FIXTURE
  cat > "$WORK/s/suite-$1.yaml" <<YAML
schema: evalbox.suite.v1
name: $1
fixtures: [$1]
candidates:
  - {id: noop, adapter: noop}
YAML
}
run() { set +e; "$EVALBOX" run "$WORK/s/suite-$1.yaml" --results "$WORK/r-$1" --retries 0 >/dev/null 2>"$WORK/err-$1"; echo $?; set -e; }

mk_fixture good '"true"' '{id: there, file: {path: file.txt, exists: true}}'
mk_suite good
[ "$(run good)" = 0 ] || { cat "$WORK/err-good"; fail "a passing suite must exit 0"; }
# A relative --results path works like an absolute one.
(cd "$WORK" && "$EVALBOX" run s/suite-good.yaml --results r-relative >/dev/null 2>"$WORK/err-rel") ||
  { cat "$WORK/err-rel"; fail "a relative --results path must work"; }
[ "$(lines "$WORK/r-relative/results.jsonl")" = 1 ] || fail "relative results not recorded"

mk_fixture badsetup '"exit 7"' '{id: there, file: {path: file.txt, exists: true}}'
mk_suite badsetup
[ "$(run badsetup)" = 2 ] || { cat "$WORK/err-badsetup"; fail "a failing setup must exit 2"; }
grep -q '"error_kind":"setup"' "$WORK/r-badsetup/results.jsonl" || fail "setup error not recorded as such"
grep -q '"verdict":"not_assessed"' "$WORK/r-badsetup/results.jsonl" || fail "a setup error is not a task failure"

mk_fixture badgrader '"true"' '{id: broken, shell: "exit 0", weight: 1}'
mk_suite badgrader
# A grader that exits non-zero is a failed check (task failure, 1), not a grader error.
sed -i 's/exit 0/exit 5/' "$WORK/s/badgrader/fixture.yaml"
[ "$(run badgrader)" = 1 ] || { cat "$WORK/err-badgrader"; fail "a failing check must exit 1"; }

# A check that cannot be evaluated (EVALBOX_FAULT, the test hook, makes it throw) is that
# run's grader error, exit 3; the other runs of the suite go on and are recorded as usual.
mk_fixture throws '"true"' '{id: explodes, file: {path: file.txt, exists: true}}'
mk_fixture calm '"true"' '{id: explodes, file: {path: file.txt, exists: true}}'
sed -i 's/explodes/fine/' "$WORK/s/calm/fixture.yaml"
cat > "$WORK/s/suite-throws.yaml" <<'YAML'
schema: evalbox.suite.v1
name: throws
fixtures: [throws, calm]
candidates:
  - {id: noop, adapter: noop}
trials: 2
concurrency: 2
YAML
rc=$(EVALBOX_FAULT=check-throw:explodes run throws)
[ "$rc" = 3 ] || { cat "$WORK/err-throws"; fail "a check that throws must exit 3, not $rc"; }
python3 - "$WORK/r-throws/results.jsonl" <<'PY' || fail "grader errors recorded wrongly"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 4, len(r)
for x in r:
    if x["fixture"]["id"] == "throws":
        assert x["grading"]["status"] == "error", x["grading"]
        assert x["grading"]["error"] == ("check explodes: could not be evaluated: fault injected "
                                         "by EVALBOX_FAULT=check-throw:explodes"), x["grading"]
        assert x["verdict"] == "not_assessed" and x["execution"]["status"] == "completed", x
    else:
        assert x["grading"]["status"] == "completed" and x["verdict"] == "passed", x
PY

cat > "$WORK/s/suite-invalid.yaml" <<'YAML'
schema: evalbox.suite.v1
name: invalid
fixtures: [good]
candidates:
  - {id: noop, adapter: noop, colour: blue}
YAML
[ "$(run invalid)" = 64 ] || fail "invalid configuration must exit 64"
grep -q "suite-invalid.yaml:5:" "$WORK/err-invalid" || { cat "$WORK/err-invalid"; fail "error must name file:line"; }
[ ! -e "$WORK/r-invalid" ] || fail "invalid configuration must create nothing"

# A shared credential that is not a shared API key is refused the same way, at its line and
# column, before anything is prepared: max_concurrent 0, and max_concurrent 2 on a JSON login.
printf '{"tokens":{"refresh_token":"rt-not-shown"}}' > "$WORK/s/login.json"
chmod 600 "$WORK/s/login.json"
for bad in "{path: login.json, max_concurrent: 0}" "{path: login.json, max_concurrent: 2}"; do
  cat > "$WORK/s/suite-sharedlogin.yaml" <<YAML
schema: evalbox.suite.v1
name: sharedlogin
fixtures: [good]
credentials:
  login: $bad
candidates:
  - {id: codex, adapter: codex, credential: login, binary: /bin/true}
YAML
  rm -rf "$WORK/state/credential-leases"
  [ "$(run sharedlogin)" = 64 ] || { cat "$WORK/err-sharedlogin"; fail "$bad must exit 64"; }
  grep -q "suite-sharedlogin.yaml:5:45: credential" "$WORK/err-sharedlogin" ||
    grep -q "suite-sharedlogin.yaml:5:45: credentials.login.max_concurrent" "$WORK/err-sharedlogin" ||
    { cat "$WORK/err-sharedlogin"; fail "$bad: the error must name file:line:col"; }
  ! grep -q "rt-not-shown" "$WORK/err-sharedlogin" || fail "a login's content in an error"
  [ ! -e "$WORK/r-sharedlogin" ] || fail "$bad: invalid configuration must create nothing"
  [ ! -e "$WORK/state/credential-leases" ] || fail "$bad: nothing may be leased"
done
no_residue
echo "exit codes: ok"
