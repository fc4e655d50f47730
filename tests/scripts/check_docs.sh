# scripts/check-docs keeps docs/cli.md and README.md true to the code: it passes on the tree as
# it is, and fails — naming what is missing and how to fix it — when an option, a command, an
# environment variable or an exit code is added without docs, or the docs keep a stale one.
# Every case runs on a copy (of the docs, or of the whole source tree), never the tree itself.
set -euo pipefail
EVALBOX=$1
SRC=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/evalbox-check-docs-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# check ROOT EXPECTED_RC [check-docs arguments...]: runs the check, output in $WORK/out.
check() {
  local root=$1 want=$2 rc=0
  shift 2
  "$SRC/scripts/check-docs" --root "$root" --evalbox "${FAKE:-$EVALBOX}" "$@" >"$WORK/out" 2>&1 ||
    rc=$?
  [ "$rc" = "$want" ] || { cat "$WORK/out" >&2; fail "check-docs $* exited $rc, not $want"; }
}
says() { grep -qF -- "$1" "$WORK/out" || { cat "$WORK/out" >&2; fail "output lacks: $1"; }; }

# A copy of what the check reads: sources, scripts, tests, docs.
tree() {
  rm -rf "$WORK/t" && mkdir "$WORK/t"
  for d in base sandbox harness adapters scripts tests bench cmake docs .ci; do
    cp -r "$SRC/$d" "$WORK/t/$d"
  done
  cp "$SRC/README.md" "$SRC/CMakeLists.txt" "$WORK/t/"
  T=$WORK/t
}

# 0. The tree as it is passes (so every failure below is caused by its one change).
check "$SRC" 0

# 1. An option row gone from the docs: named, with the command that fixes it.
tree
grep -v '^| `--retries` |' "$SRC/docs/cli.md" >"$T/docs/cli.md"
check "$T" 1
says '`evalbox run` lacks: | `--retries` |'
says 'scripts/check-docs --fix'

# 2. An option added to the binary without docs, then --fix: the page gains it and passes.
cat >"$WORK/fake-evalbox" <<FAKE
#!/bin/sh
if [ "\$1" = --cli-reference ]; then
  "$EVALBOX" --cli-reference | sed '/^| \`--retries\` |/a | \`--brand-new\` | \`TEXT\` |  | an option nobody documented |'
else
  exec "$EVALBOX" "\$@"
fi
FAKE
chmod +x "$WORK/fake-evalbox"
tree
FAKE=$WORK/fake-evalbox check "$T" 1
says '`evalbox run` lacks: | `--brand-new` |'
FAKE=$WORK/fake-evalbox check "$T" 0 --fix
grep -qF '| `--brand-new` |' "$T/docs/cli.md" || fail "--fix did not write the new option"
FAKE=$WORK/fake-evalbox check "$T" 0
# ... and the real binary now finds the page stale.
check "$T" 1
says '`evalbox run` has stale: | `--brand-new` |'

# 3. A command added: --fix writes its reference, but its exit codes and its line in the
# --help table need a person.
cat >"$WORK/fake-evalbox" <<FAKE
#!/bin/sh
if [ "\$1" = --cli-reference ]; then
  "$EVALBOX" --cli-reference
  printf '\n### \`evalbox teleport\`\n\nMove a results directory.\n\nUsage: \`evalbox teleport DIR...\`\n'
else
  exec "$EVALBOX" "\$@"
fi
FAKE
tree
FAKE=$WORK/fake-evalbox check "$T" 1
says 'lacks the command `evalbox teleport`'
FAKE=$WORK/fake-evalbox check "$T" 1 --fix
says 'does not list `evalbox teleport` in its table'
says 'does not say what `evalbox teleport` exits with'

# 4. Environment variables read without docs: a literal, a loop over literals, a script's.
tree
cat >"$T/base/extra.cpp" <<'CPP'
#include <cstdlib>
const char* a() { return std::getenv("EVALBOX_BRAND_NEW"); }
const char* b() {
  for (const char* var : {"EVALBOX_LOOPED", "OTHER_LOOPED"})
    if (const char* v = ::getenv(var)) return v;
  return nullptr;
}
CPP
# (Written through %s: check-docs reads this file too, and must not see a read here.)
printf '#!/bin/sh\necho "${%s:-x}"\n' EVALBOX_SCRIPT_KNOB >"$T/scripts/new-thing"
check "$T" 1
for v in EVALBOX_BRAND_NEW EVALBOX_LOOPED OTHER_LOOPED EVALBOX_SCRIPT_KNOB; do
  says "docs/cli.md: environment variable \`$v\`"
  says "README.md: environment variable \`$v\`"
done
says 'base/extra.cpp:2'

# 5. A variable whose name the code computes cannot be checked: it must be listed on purpose.
tree
printf '#include <cstdlib>\nconst char* c(const char* n) { return std::getenv(n); }\n' \
  >"$T/harness/cli/extra.cpp"
check "$T" 1
says 'harness/cli/extra.cpp:2: getenv(n)'
says 'DYNAMIC_GETENV'

# 6. A variable the docs keep after the code stopped reading it.
# (The name is spelled in two parts: check-docs searches this file too for names in use.)
tree
gone=EVALBOX_GO""NE
sed -i "s/^| \`EVALBOX_LOG\` |/| \`$gone\` | gone |\n&/" "$T/README.md"
check "$T" 1
says "README.md: documents \`$gone\`, which no code"

# 7. Exit codes: a constant of `evalbox run` without its row, and a new one.
tree
grep -v '^| 3 | `exit_grader_failed`' "$SRC/docs/cli.md" >"$T/docs/cli.md"
check "$T" 1
says 'exit code 3 (exit_grader_failed'
tree
sed -i 's/^  exit_usage = 64,/  exit_shard_mismatch = 5,\n&/' "$T/harness/runner/exit_status.h"
check "$T" 1
says 'exit code 5 (exit_shard_mismatch'
# A command's own exit constant (harness/cli/cmd_*.cpp) needs a row too.
tree
printf 'constexpr int exit_brand_new = 99;\n' >>"$T/harness/cli/cmd_gc.cpp"
check "$T" 1
says 'exit code 99 (exit_brand_new, harness/cli/cmd_gc.cpp)'

# 8. No markers: nothing to compare against, and --fix does not guess where they go.
tree
grep -v '^<!-- BEGIN evalbox --cli-reference' "$SRC/docs/cli.md" >"$T/docs/cli.md"
check "$T" 2 --fix
says 'lacks the markers'
cmp -s <(grep -v '^<!-- BEGIN evalbox --cli-reference' "$SRC/docs/cli.md") "$T/docs/cli.md" ||
  fail "--fix changed a page without markers"

echo "check-docs: ok"
