# Shared by the real-agent end-to-end scripts: installs the pinned clients (or skips), starts
# the stub model server on a free loopback port, and writes a suite around the e2e fixture.
# Usage: source lib.sh EVALBOX HELPER SRC (the integration lib's arguments).
source "$3/tests/integration/lib.sh"

STUB_PID=
stop_stub() {  # idempotent: a test may stop the stub itself (to prove nothing calls it)
  if [ -n "$STUB_PID" ]; then
    kill "$STUB_PID" 2>/dev/null || true
    wait "$STUB_PID" 2>/dev/null || true
    STUB_PID=
  fi
}
# EVALBOX_E2E_KEEP=1 keeps the work directory for a look after a failure.
trap 'stop_stub; if [ -n "${EVALBOX_E2E_KEEP:-}" ]; then echo "kept $WORK" >&2; else cleanup; fi' EXIT

skip_or_fail() {
  [ "${EVALBOX_REQUIRE_ISOLATION:-}" = 1 ] && fail "$1 (required under EVALBOX_REQUIRE_ISOLATION=1)"
  echo "SKIP: $1"
  exit 0
}

# The clients, from the install cache (fetched once with npm; skip when npm is unreachable).
install_agents() {
  local rc=0
  AGENT_CACHE=$("$SRC/scripts/install-agents" 2>"$WORK/install.log") || rc=$?
  if [ "$rc" = 3 ]; then skip_or_fail "npm cannot reach its registry to install the agent clients"; fi
  [ "$rc" = 0 ] || { cat "$WORK/install.log" >&2; fail "scripts/install-agents failed ($rc)"; }
  export EVALBOX_AGENT_CACHE=$AGENT_CACHE
}

# start_stub ARGS...: the stub model server on 127.0.0.1:<free port>; sets STUB_PORT, STUB_LOG.
start_stub() {
  STUB_LOG=$WORK/stub.log
  python3 "$SRC/tests/agents/stub_model.py" --port-file "$WORK/stub.port" --log "$STUB_LOG" "$@" \
    >"$WORK/stub.out" 2>&1 &
  STUB_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/stub.port" ] && break; sleep 0.1; done
  [ -s "$WORK/stub.port" ] || { cat "$WORK/stub.out" >&2; fail "the stub model server did not start"; }
  STUB_PORT=$(cat "$WORK/stub.port")
}
