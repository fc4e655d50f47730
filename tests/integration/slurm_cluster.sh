# A real Slurm cluster on this machine (Debian's slurm-wlm and munge: a controller and one node
# with 2 CPUs on 127.0.0.1, no cgroup plugins, a munged of its own), and the example suite run
# on it by an ordinary user (nobody) the way docs/scale-out.md says: `evalbox slurm --shards 3
# --submit` queues a 3-task job array and the merge job after it. The merged results must be
# those of one `evalbox run` of the same suite: the same run ids, verdicts and counts, and the
# same summary.json but for timings. Every daemon the test started is stopped on exit.
source "$(dirname "$0")/lib.sh"
need_isolation

skip_or_fail() {
  [ "${EVALBOX_REQUIRE_ISOLATION:-}" = 1 ] && fail "$1 (required under EVALBOX_REQUIRE_ISOLATION=1)"
  echo "SKIP: $1"; exit 0
}
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
   ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  # scripts/bootstrap --tests lists slurm-wlm and munge; a machine set up before that gets them.
  "$SRC/scripts/bootstrap" --tests >"$WORK/apt.log" 2>&1 ||
    { tail -5 "$WORK/apt.log" >&2; skip_or_fail "Debian's slurm-wlm and munge cannot be installed"; }
fi

# Everything of the cluster lives here (short paths: a unix socket path has at most 107 bytes).
C=$(mktemp -d /tmp/evalbox-slurm-XXXXXX)
chmod 0711 "$C"
export SLURM_CONF=$C/slurm.conf
stop_cluster() {
  local pidfile pid
  for pidfile in "$C/slurmd.pid" "$C/slurmctld.pid" "$C/munged.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$C"
}
trap 'stop_cluster; cleanup' EXIT
on_failure() {
  for f in "$C"/slurmctld.log "$C"/slurmd.log "$C"/munged.log "$NR"/res/slurm/*.out; do
    [ -f "$f" ] && { echo "== $f" >&2; tail -15 "$f" >&2; }
  done
  fail "$1"
}

# munge: a key of its own and a socket of its own (nothing of the host's munge is touched).
head -c 1024 /dev/urandom >"$C/munge.key"
chmod 0400 "$C/munge.key"
munged --force --socket="$C/munge.socket" --key-file="$C/munge.key" --pid-file="$C/munged.pid" \
  --log-file="$C/munged.log" --seed-file="$C/munged.seed" || on_failure "munged did not start"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
host=$(hostname)
mkdir -p "$C/state" "$C/spool"
cat >"$SLURM_CONF" <<CONF
ClusterName=evalbox-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$C/munge.socket
CredType=cred/munge
StateSaveLocation=$C/state
SlurmdSpoolDir=$C/spool
SlurmctldPidFile=$C/slurmctld.pid
SlurmdPidFile=$C/slurmd.pid
SlurmctldLogFile=$C/slurmctld.log
SlurmdLogFile=$C/slurmd.log
# No cgroup plugins: processes tracked by their parent, tasks not confined.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -f "$SLURM_CONF" || on_failure "slurmctld did not start"
slurmd -f "$SLURM_CONF" || on_failure "slurmd did not start"
for _ in $(seq 1 300); do
  [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ] && break
  sleep 0.1
done
[ "$(sinfo -h -N -o %t)" = idle ] || on_failure "the node did not become idle"

# nobody runs copies of the binaries (the build tree may be out of its reach), from a base
# directory others may pass through; its results and state are its own.
B=$C/base
NR=$B/nr
mkdir -p "$NR" "$B/bin"
chmod 0711 "$B"
install -m 0755 "$EVALBOX" "$B/bin/evalbox"
install -m 0755 "$EVALBOX_HELPER" "$B/bin/evalbox-sandbox"
cp -r "$SRC/fixtures/examples" "$NR/ex"
chown -R 65534:65534 "$NR"
as_nobody() {
  (cd "$NR" && setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -u EVALBOX_HELPER HOME="$NR" EVALBOX_STATE_DIR="$NR/state" SLURM_CONF="$SLURM_CONF" "$@")
}
as_nobody "$B/bin/evalbox" slurm "$NR/ex/suite.yaml" --shards 3 --parallel 2 --time 10m \
  --results "$NR/res" --submit >"$WORK/ids" 2>"$WORK/slurm.err" ||
  { cat "$WORK/slurm.err" >&2; on_failure "evalbox slurm --submit failed"; }
array=$(awk '$1 == "shards" {print $2}' "$WORK/ids")
merge=$(awk '$1 == "merge" {print $2}' "$WORK/ids")
[ -n "$array" ] && [ -n "$merge" ] || on_failure "no job ids printed: $(cat "$WORK/ids")"
for _ in $(seq 1 2400); do  # at most 240 s
  [ -z "$(squeue -h 2>/dev/null)" ] && break
  sleep 0.1
done
[ -z "$(squeue -h)" ] || { squeue >&2; on_failure "the jobs did not finish within 240 s"; }
log=$NR/res/slurm/merge-$merge.out
[ -f "$log" ] || on_failure "the merge job wrote no log"
grep -q "24 of the plan's 24 runs recorded" "$log" || on_failure "the merge is not complete"
for k in 0 1 2; do
  [ -f "$NR/res/slurm/shard-$array-$k.out" ] || on_failure "array task $k wrote no log"
  [ "$(stat -c %u "$NR/res/shards/$k/results.jsonl")" = 65534 ] ||
    on_failure "shard $k did not run as nobody"
done

# One process, the same suite, the same user: the merged results must be its results.
set +e
as_nobody "$B/bin/evalbox" run "$NR/ex/suite.yaml" --results "$NR/single" >/dev/null 2>"$WORK/single.err"
rc=$?
set -e
[ "$rc" = 1 ] || { tail -5 "$WORK/single.err" >&2; on_failure "the single run exited $rc"; }
python3 - "$NR/res" "$NR/single" <<'PY' || on_failure "the merged results differ from one process's"
import json, sys
merged, single = sys.argv[1], sys.argv[2]
def runs(d):
    return sorted((r["run_id"], r["candidate"]["id"], r["fixture"]["id"], r["trial"], r["verdict"])
                  for r in map(json.loads, open(f"{d}/results.jsonl")))
a, b = runs(merged), runs(single)
assert len(a) == len(b) == 24, (len(a), len(b))
assert a == b, [x for x in a if x not in b] + [x for x in b if x not in a]
def without_timings(j):  # usage holds wall times (and tokens, null here)
    if isinstance(j, dict):
        return {k: without_timings(v) for k, v in j.items() if k != "usage"}
    if isinstance(j, list):
        return [without_timings(v) for v in j]
    return j
sa = without_timings(json.load(open(f"{merged}/summary.json")))
sb = without_timings(json.load(open(f"{single}/summary.json")))
assert sa == sb, "summary.json differs beyond timings"
assert sa["runs"] == {"total": 24, "errors": 0}, sa["runs"]
print("merged = single process:", sum(1 for r in a if r[4] == "passed"), "of 24 passed")
PY
EVALBOX_STATE_DIR=$NR/state
no_residue
echo "slurm: 3-shard array and merge job as nobody: ok"
