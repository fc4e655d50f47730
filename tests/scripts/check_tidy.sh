#!/usr/bin/env bash
# scripts/check-tidy must fail on what .clang-tidy holds — a constant named in kCamelCase and a
# function in CamelCase, each with its file and line — and pass the same code named in
# lower_snake_case.
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/naming_probe.cpp" <<'CPP'
namespace evalbox {
constexpr int kRetries = 3;
int CountRetries() { return kRetries; }
}  // namespace evalbox
CPP
if EVALBOX_BUILD_DIR=$build "$src/scripts/check-tidy" "$work/naming_probe.cpp" 2>"$work/out"; then
  echo "FAIL: check-tidy passed kCamelCase and CamelCase names"; exit 1
fi
grep -qF "naming_probe.cpp:2:" "$work/out" || { echo "FAIL: no line 2 in:"; cat "$work/out"; exit 1; }
grep -qF "naming_probe.cpp:3:" "$work/out" || { echo "FAIL: no line 3 in:"; cat "$work/out"; exit 1; }
grep -qF "readability-identifier-naming" "$work/out" || { echo "FAIL: no check named in:"; cat "$work/out"; exit 1; }
cat >"$work/naming_probe.cpp" <<'CPP'
namespace evalbox {
constexpr int retries = 3;
int count_retries() { return retries; }
}  // namespace evalbox
CPP
EVALBOX_BUILD_DIR=$build "$src/scripts/check-tidy" "$work/naming_probe.cpp" ||
  { echo "FAIL: a clean file failed"; exit 1; }
echo "ok"
