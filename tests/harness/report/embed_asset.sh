#!/bin/bash
# cmake/embed_asset.cmake, which compiles report.html's stylesheet and script into evalbox:
# every byte of an asset reaches the raw string as it is (CMake's own syntax, backslashes,
# quotes, semicolons, UTF-8, no final newline), and an asset holding the literal's closing
# delimiter is refused rather than cut.
# usage: embed_asset.sh CMAKE SOURCE_DIR
set -euo pipefail
cmake=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

printf '%s' 'a{b:"c"};d\e ${NOT_A_VAR} $<GENEX> [[x]] ;; é ‹›
"quoted" )" )evalbox" \\n' >"$work/in.js"
"$cmake" -DINPUT="$work/in.js" -DOUTPUT="$work/out.inc" -DNAME=asset \
  -P "$src/cmake/embed_asset.cmake" || fail "embedding a hostile but valid asset failed"
python3 - "$work/in.js" "$work/out.inc" <<'PY' || fail "the embedded bytes differ"
import sys
want = open(sys.argv[1], "rb").read()
inc = open(sys.argv[2], "rb").read()
head = b'inline constexpr std::string_view asset = R"evalbox_asset('
tail = b')evalbox_asset";\n'
start = inc.index(head) + len(head)
assert inc.endswith(tail), inc[-40:]
assert inc[start:-len(tail)] == want, (inc[start:-len(tail)], want)
PY
# Rewritten only when the bytes change (so that nothing recompiles for nothing).
touch -d '2001-01-01' "$work/out.inc"
"$cmake" -DINPUT="$work/in.js" -DOUTPUT="$work/out.inc" -DNAME=asset \
  -P "$src/cmake/embed_asset.cmake"
[ "$(stat -c %Y "$work/out.inc")" = "$(date -d 2001-01-01 +%s)" ] || fail "an unchanged .inc was rewritten"

printf 'x = ")evalbox_asset";\n' >"$work/bad.js"
if "$cmake" -DINPUT="$work/bad.js" -DOUTPUT="$work/bad.inc" -DNAME=asset \
     -P "$src/cmake/embed_asset.cmake" 2>"$work/err"; then
  fail "an asset holding the closing delimiter was embedded"
fi
grep -q "contains .)evalbox_asset" "$work/err" || { cat "$work/err"; fail "no reason given"; }
[ ! -e "$work/bad.inc" ] || fail "a refused asset left an .inc"
echo "embed asset: ok"
