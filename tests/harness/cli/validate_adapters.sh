#!/bin/bash
# The adapter names a suite may use are exactly the registry's: `evalbox validate` and
# `evalbox run` report an unknown adapter at its FILE:LINE:COL with the registered names (the
# same words as tests/data/config/suite/unknown-adapter.expected), and accept every registered
# one. No sandbox needed: run stops at validation.
# usage: validate_adapters.sh EVALBOX SOURCE_DIR
set -euo pipefail
evalbox=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

data=$src/tests/data/config/suite
set +e
"$evalbox" validate "$data/unknown-adapter.yaml" >"$work/out" 2>"$work/err"
rc=$?
set -e
[ "$rc" = 64 ] || { cat "$work/out" "$work/err"; fail "validate exited $rc, expected 64"; }
sed "s|^$data/||" "$work/err" >"$work/got"
diff -u "$data/unknown-adapter.expected" "$work/got" || fail "validate's messages differ"

set +e
"$evalbox" run "$data/unknown-adapter.yaml" --results "$work/results" >"$work/out" 2>"$work/err"
rc=$?
set -e
[ "$rc" = 64 ] || { cat "$work/out" "$work/err"; fail "run exited $rc, expected 64"; }
sed "s|^$data/||" "$work/err" >"$work/got"
diff -u "$data/unknown-adapter.expected" "$work/got" || fail "run's messages differ"
[ ! -e "$work/results" ] || fail "run created its results directory for an invalid suite"

# Every registered adapter is accepted (their settings are checked by the adapters).
mkdir -p "$work/s"
cp -r "$src/fixtures/examples/off-by-one" "$work/s/fx"
cat >"$work/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: every-adapter
fixtures: [fx]
candidates:
  - {id: a, adapter: noop}
  - {id: b, adapter: oracle}
  - {id: c, adapter: command, argv: [/bin/true]}
  - {id: d, adapter: codex, binary: /bin/true}
  - {id: e, adapter: claude-code, binary: /bin/true}
  - {id: f, adapter: gemini, binary: /bin/true}
YAML
"$evalbox" validate "$work/s/suite.yaml" >"$work/out" 2>"$work/err" ||
  { cat "$work/out" "$work/err"; fail "a registered adapter was rejected"; }
echo "validate adapters: ok"
