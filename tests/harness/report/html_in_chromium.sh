#!/bin/bash
# report.html in real headless Chromium: a small results directory (drill-downs, escaping) and
# a 10,000-run one (responsiveness). The page's inline script writes the counts it computes
# into the DOM; they, and the charts evalbox drew, must match what the generator expects.
# Screenshots are kept under BUILD_DIR/test-artifacts/report-html/.
#
# usage: html_in_chromium.sh EVALBOX SOURCE_DIR BUILD_DIR
# Installs Debian's chromium when missing; skips (exit 77) when it cannot, except under
# EVALBOX_REQUIRE_ISOLATION=1, where that is a failure.
set -euo pipefail
evalbox=$1 src=$2 build=$3
here=$src/tests/harness/report
artifacts=$build/test-artifacts/report-html
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

skip_or_fail() {
  if [ "${EVALBOX_REQUIRE_ISOLATION:-0}" = 1 ]; then
    echo "FAIL: $1 (EVALBOX_REQUIRE_ISOLATION=1: the browser test may not skip)" >&2
    exit 1
  fi
  echo "SKIP: $1" >&2
  exit 77
}

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's chromium (apt-get)..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
      >"$work/apt.log" 2>&1 || { tail -5 "$work/apt.log" >&2; true; }
    browser=$(command -v chromium || true)
  fi
  [ -n "$browser" ] || skip_or_fail "chromium is not installed and could not be installed"
fi

chrome() {  # chrome OUT_PREFIX URL [HEIGHT]: dump the DOM and take a screenshot
  local profile
  profile=$(mktemp -d "$work/profile.XXXX")
  local flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
               --disable-component-update --disable-sync --no-first-run
               --user-data-dir="$profile")
  timeout 120 "$browser" "${flags[@]}" --dump-dom "$2" >"$1.dom.html" 2>"$1.stderr" || {
    cat "$1.stderr" >&2; echo "FAIL: chromium --dump-dom $2" >&2; exit 1; }
  timeout 120 "$browser" "${flags[@]}" --screenshot="$1.png" --window-size=1280,"${3:-2000}" "$2" \
    >/dev/null 2>>"$1.stderr" || { cat "$1.stderr" >&2; echo "FAIL: screenshot $2" >&2; exit 1; }
}

check() {  # check DOM EXPECTED [HOSTILE]: compare what rendered with what must have
  python3 - "$@" <<'PY'
import json, re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
exp = json.load(open(sys.argv[2]))
problems = []
def want(what, got, expected):
    if got != expected:
        problems.append(f"{what}: got {got!r}, expected {expected!r}")
def span(i):
    m = re.search(r'id="%s"[^>]*>([^<]*)<' % re.escape(i), dom)
    return m.group(1) if m else None
want("script ran", 'data-ready="1"' in dom, True)
want("runs counted by the script", span("js-count-runs"), str(exp["runs"]))
want("passed counted by the script", span("js-count-passed"), str(exp["passed"]))
want("failed counted by the script", span("js-count-failed"), str(exp["failed"]))
want("errors counted by the script", span("js-count-error"), str(exp["errors"]))
want("bars", dom.count('<rect class="bar"'), exp["candidates"])
want("heatmap cells", dom.count('<rect class="heat"'), exp["cells"])
want("comparison means", dom.count('<circle class="diff-mean"'), exp["comparisons"])
want("error rows", dom.count('<tr class="error-row">'), exp["errors"])
want("candidate rows", dom.count('<tr class="candidate">'), exp["candidates"])
want("comparison rows", dom.count('<tr class="comparison">'), exp["comparisons"])
# No run reported a cost: every usage row says unknown (candidates and "all"), never $0.
want("unknown cost cells", dom.count('<td class="cost">unknown</td>'), exp["candidates"] + 1)
want("no $0", "$0" in dom, False)
m = re.search(r'id="runs-list" data-rendered="(\d+)" data-matching="(\d+)"', dom)
want("run rows rendered (one page)", m and int(m.group(1)),
     1 if len(sys.argv) > 3 else min(100, exp["runs"]))
want("run summaries in the DOM", dom.count('<details class="run'),
     1 if len(sys.argv) > 3 else min(100, exp["runs"]))
# The hostile names and texts are text, never markup.
want("no injected <img>", "<img" in dom, False)
want("no injected <b>", "<b>&amp;" in dom or 'noisy<b>' in dom, False)
want("escaped candidate shown", "noisy&lt;b&gt;&amp;" in dom, True)
if len(sys.argv) > 3:
    # #run=<id> opened one run: its checks, diff and transcript steps were rendered.
    want("opened run", f'id="run-{sys.argv[3]}" open=""' in dom, True)
    want("checks table rows", dom.count('<tr class="check">'), 2)
    want("transcript step", dom.count('class="step agent"'), 1)
    want("diff shown escaped", "&lt;/script&gt;&lt;img src=x" in dom, True)
    want("message shown escaped", "&lt;script&gt;alert(2)&lt;/script&gt;" in dom, True)
else:
    m = re.search(r'data-render-ms="(\d+)"', dom)
    ms = int(m.group(1)) if m else None
    print(f"render-ms={ms}")
    if ms is None or ms > 3000:
        problems.append(f"drill-down script took {ms} ms (limit 3000)")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
}

# 1. Small: every run has files; one run opened through #run=<id>.
python3 "$here/make_results.py" "$work/small" --fixtures 6 --trials 3
"$evalbox" report "$work/small" --format html --baseline baseline >/dev/null
hostile=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hostile_run"])' \
          "$work/small/expected.json")
chrome "$artifacts/small" "file://$work/small/report.html"
check "$artifacts/small.dom.html" "$work/small/expected.json"
# Tall enough for the whole filtered page: a headless screenshot of a scrolled page is blank.
chrome "$artifacts/small-run" "file://$work/small/report.html#run=$hostile" 5000
check "$artifacts/small-run.dom.html" "$work/small/expected.json" "$hostile"

# 2. 10,000 runs: 625 fixtures × 4 candidates × 4 trials.
python3 "$here/make_results.py" "$work/large" --fixtures 625 --trials 4 --files some
start=$(date +%s%N)
"$evalbox" report "$work/large" --format html --baseline baseline >/dev/null
echo "report of 10000 runs: $(( ($(date +%s%N) - start) / 1000000 )) ms, $(stat -c %s \
  "$work/large/report.html") bytes" >&2
start=$(date +%s%N)
chrome "$artifacts/large" "file://$work/large/report.html"
echo "chromium load + dump + screenshot: $(( ($(date +%s%N) - start) / 1000000 )) ms" >&2
check "$artifacts/large.dom.html" "$work/large/expected.json"
echo "PASS: screenshots in $artifacts" >&2
