#!/usr/bin/env bash
# evalbox defines only the command named first on its command line (harness/cli/main.cpp): each
# top-level command of the reference must then be the one that answers, with its own usage, and
# the reference (every command defined) must list the same commands as before.
set -euo pipefail
evalbox=$1
fail() { echo "one_command: $*" >&2; exit 1; }
mapfile -t commands < <("$evalbox" --cli-reference | sed -n 's/^### `evalbox \([a-z0-9-]*\)`$/\1/p')
[ "${#commands[@]}" -ge 10 ] || fail "the reference lists ${#commands[@]} commands"
for c in "${commands[@]}"; do
  help=$("$evalbox" "$c" --help) || fail "evalbox $c --help exited $?"
  usage=$(grep -m1 '^Usage:' <<<"$help") || fail "evalbox $c --help printed no usage"
  [[ $usage == "Usage: evalbox $c "* ]] || fail "evalbox $c --help answered as another command: $usage"
  # The same definitions as in the reference: every option the reference shows for the
  # command appears in its own help.
  while read -r opt; do
    grep -q -- "$opt" <<<"$help" || fail "evalbox $c --help lacks $opt, which the reference lists"
  done < <("$evalbox" --cli-reference |
    awk -v h="### \`evalbox $c\`" '$0 == h {on = 1; next} /^### / {on = 0} on' |
    grep -o -- '`--[a-z0-9-]*' | tr -d '`' | sort -u)
done
# No command named first: every command is defined, so an unknown one is a usage error.
if "$evalbox" no-such-command >/dev/null 2>&1; then fail "an unknown command was accepted"; fi
top=$("$evalbox" --help)
grep -q 'sandbox' <<<"$top" || fail "evalbox --help does not list the commands"
echo "one_command: ${#commands[@]} commands, each defined alone, answer as themselves"
