#!/usr/bin/env bash
# scripts/check-layering on a copy of the tree: clean as it is, and failing — with the file,
# the line and what to do — on a new edge between sandbox or harness folders, an allowed edge
# no include uses any more, a raw system call outside sandbox/sys (in the sandbox or the
# harness), RapidJSON outside the results lexer, a folder its table does not list, the floor
# (base/) including a layer above it, a link list that differs from the include graph, a
# second library in a folder, and a link list that names a library instead of its alias.
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$src/base" "$src/sandbox" "$src/scripts" "$src/harness" "$src/tests" "$src/bench" "$work/"
check() { python3 "$work/scripts/check-layering" 2>"$work/out"; }
expect_failure() {  # what the output must say
  if check; then echo "FAIL: passed, expected: $1"; exit 1; fi
  grep -qF -- "$1" "$work/out" || { echo "FAIL: expected '$1' in:"; cat "$work/out"; exit 1; }
}

check || { echo "FAIL: the tree itself does not pass:"; cat "$work/out"; exit 1; }

# A concern including a sibling it may not: net -> mount.
cp "$work/sandbox/net/relay.cpp" "$work/relay.cpp.orig"
echo '#include "sandbox/mount/mount.h"' >>"$work/sandbox/net/relay.cpp"
line=$(wc -l <"$work/sandbox/net/relay.cpp")
expect_failure "sandbox/net/relay.cpp:$line: may not include <sandbox/mount/mount.h>"
cp "$work/relay.cpp.orig" "$work/sandbox/net/relay.cpp"

# A lower layer including a higher one: sys -> helper.
echo '#include "sandbox/helper/compile.h"' >>"$work/sandbox/sys/probe.cpp"
expect_failure "sandbox/sys/probe.cpp"
cp "$src/sandbox/sys/probe.cpp" "$work/sandbox/sys/probe.cpp"

# An allowed edge that nothing uses: helper -> spec is only the system paths include.
sed -i '/#include "sandbox\/spec\/system_paths.h"/d' "$work/sandbox/helper/compile.cpp"
expect_failure "sandbox/helper -> sandbox/spec is allowed but no include uses it"
cp "$src/sandbox/helper/compile.cpp" "$work/sandbox/helper/compile.cpp"

# A raw system call outside sandbox/sys.
cp "$work/base/fs.cpp" "$work/fs.cpp.orig"
echo 'int f() { return static_cast<int>(::syscall(SYS_gettid)); }' >>"$work/base/fs.cpp"
line=$(wc -l <"$work/base/fs.cpp")
expect_failure "base/fs.cpp:$line: a raw syscall(2) outside sandbox/sys"
cp "$work/fs.cpp.orig" "$work/base/fs.cpp"

# The same in the harness, which reaches the kernel only through the sandbox's facade.
cp "$work/harness/report/html.cpp" "$work/html.cpp.orig"
echo 'int g() { return static_cast<int>(::syscall(SYS_gettid)); }' >>"$work/harness/report/html.cpp"
line=$(wc -l <"$work/harness/report/html.cpp")
expect_failure "harness/report/html.cpp:$line: a raw syscall(2) outside sandbox/sys"
cp "$work/html.cpp.orig" "$work/harness/report/html.cpp"

# RapidJSON outside the one lexer that may use it.
cp "$work/harness/results/results.cpp" "$work/results.cpp.orig"
echo '#include <rapidjson/reader.h>' >>"$work/harness/results/results.cpp"
line=$(wc -l <"$work/harness/results/results.cpp")
expect_failure "harness/results/results.cpp:$line: may not include <rapidjson/reader.h>"
cp "$work/results.cpp.orig" "$work/harness/results/results.cpp"

# A new folder nobody placed in the graph.
mkdir "$work/sandbox/widget" && echo '#pragma once' >"$work/sandbox/widget/widget.h"
expect_failure "sandbox/widget: a folder SANDBOX_EDGES does not list"
rm -r "$work/sandbox/widget"

# A harness format including what is built on it: results -> report.
cp "$work/harness/results/record.cpp" "$work/record.cpp.orig"
echo '#include "harness/report/report.h"' >>"$work/harness/results/record.cpp"
line=$(wc -l <"$work/harness/results/record.cpp")
expect_failure "harness/results/record.cpp:$line: may not include <harness/report/report.h>"
cp "$work/record.cpp.orig" "$work/harness/results/record.cpp"

# An allowed harness edge that nothing uses: fixture -> results is only the trust rule's.
for f in trust.h trust.cpp; do cp "$work/harness/fixture/$f" "$work/$f.orig"; done
sed -i '/#include "harness\/results\//d' "$work/harness/fixture/trust.h" "$work/harness/fixture/trust.cpp"
expect_failure "harness/fixture -> harness/results is allowed but no include uses it"
for f in trust.h trust.cpp; do cp "$work/$f.orig" "$work/harness/fixture/$f"; done

# A new harness folder nobody placed in the graph.
mkdir "$work/harness/widget" && echo '#pragma once' >"$work/harness/widget/widget.h"
expect_failure "harness/widget: a folder HARNESS_EDGES does not list"
rm -r "$work/harness/widget"

# The floor including a layer above it.
cp "$work/base/fs.cpp" "$work/fs.cpp.orig"
echo '#include "sandbox/sys/probe.h"' >>"$work/base/fs.cpp"
line=$(wc -l <"$work/base/fs.cpp")
expect_failure "base/fs.cpp:$line: may not include <sandbox/sys/probe.h>"
cp "$work/fs.cpp.orig" "$work/base/fs.cpp"

# A link list that is not the include graph: a library linked that nothing includes, and an
# include whose library is not linked.
cp "$work/sandbox/net/CMakeLists.txt" "$work/net.cmake.orig"
sed -i 's/target_link_libraries(evalbox_net PUBLIC evalbox::base)/target_link_libraries(evalbox_net PUBLIC evalbox::mount evalbox::base)/' \
  "$work/sandbox/net/CMakeLists.txt"
expect_failure "sandbox/net/CMakeLists.txt: links sandbox/mount without including it"
sed -i 's/PUBLIC evalbox::mount evalbox::base)/PUBLIC evalbox::mount)/' "$work/sandbox/net/CMakeLists.txt"
expect_failure "sandbox/net/CMakeLists.txt: includes base without linking its library"
cp "$work/net.cmake.orig" "$work/sandbox/net/CMakeLists.txt"

# A link list naming the library, not its alias (a typo would be a missing -l at link time).
sed -i 's/PUBLIC evalbox::base)/PUBLIC evalbox_base)/' "$work/sandbox/net/CMakeLists.txt"
expect_failure "sandbox/net/CMakeLists.txt: links evalbox_base; name the alias evalbox::base"
cp "$work/net.cmake.orig" "$work/sandbox/net/CMakeLists.txt"

# A second library in a folder (a second concern is a second folder), and one without alias.
printf 'add_library(evalbox_relay2 STATIC relay.cpp)\n' >>"$work/sandbox/net/CMakeLists.txt"
expect_failure "sandbox/net/CMakeLists.txt: 2 libraries (evalbox_net, evalbox_relay2)"
expect_failure "sandbox/net/CMakeLists.txt: evalbox_relay2 has no alias evalbox::relay2"
cp "$work/net.cmake.orig" "$work/sandbox/net/CMakeLists.txt"

check || { echo "FAIL: restoring the tree did not pass again:"; cat "$work/out"; exit 1; }
echo "ok"
