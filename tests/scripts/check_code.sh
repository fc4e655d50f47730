#!/usr/bin/env bash
# scripts/check-code must fail on what it exists to catch — operator[] on a const json, with the
# file, line and what to use instead — and pass the same subscript on a mutable value.
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/const_subscript_probe.cpp" <<'CPP'
#include "base/json.h"
namespace evalbox {
int probe(const json& j) { return j["x"].is_null() ? 1 : 0; }
int mutable_is_fine(json& j) { return j["x"].is_null() ? 1 : 0; }
}  // namespace evalbox
CPP
if EVALBOX_BUILD_DIR=$build "$src/scripts/check-code" "$work/const_subscript_probe.cpp" 2>"$work/out"; then
  echo "FAIL: check-code passed a const subscript"; exit 1
fi
grep -qF "const_subscript_probe.cpp:3:" "$work/out" || { echo "FAIL: no line 3 in:"; cat "$work/out"; exit 1; }
grep -qF "json_member or json_get" "$work/out" || { echo "FAIL: no remedy in:"; cat "$work/out"; exit 1; }
if grep -qF "const_subscript_probe.cpp:4:" "$work/out"; then
  echo "FAIL: a mutable value's subscript was flagged:"; cat "$work/out"; exit 1
fi
sed -i '3d' "$work/const_subscript_probe.cpp"
EVALBOX_BUILD_DIR=$build "$src/scripts/check-code" "$work/const_subscript_probe.cpp" ||
  { echo "FAIL: a clean file failed"; exit 1; }
echo "ok"
