#!/usr/bin/env bash
# What a cache saves (docs/performance.md, "Caches"): `pip install` of N packages in a run,
# cold — from a package index on a host loopback port, through the sandbox's allow-listed
# network — against warm — from a cache warmed once from that index, with no network at all.
# The index is generated here (N pure-Python wheels of SIZE KiB each, every one depending on
# the next, so pip resolves a chain as it does for real projects) and served by python3's
# http.server; nothing leaves the machine. Each run also proves that what it writes into the
# cache does not reach the next run. Prints the medians and their ratio.
#
#   bench/cache_pip.sh build/harness/cli/evalbox [N=40] [SIZE_KIB=256] [TRIALS=5]
set -euo pipefail
EVALBOX=$(realpath "$1")
N=${2:-40}
SIZE=${3:-256}
TRIALS=${4:-5}
WORK=$(mktemp -d)
export EVALBOX_STATE_DIR=$WORK/state
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$WORK"' EXIT

python3 - "$WORK/index" "$N" "$SIZE" <<'PY'
import base64, hashlib, os, sys, zipfile
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * 1024
os.makedirs(os.path.join(root, "files"))
def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"
for i in range(n):
    name = f"evb-pkg{i}"
    mod = f"evb_pkg{i}"
    dist = f"{mod}-1.0.dist-info"
    requires = f"Requires-Dist: evb-pkg{i + 1}\n" if i + 1 < n else ""
    files = {
        f"{mod}/__init__.py": f"VALUE = {i}\n".encode(),
        f"{mod}/data.bin": os.urandom(size),
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{requires}".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: evalbox-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "\n".join(record_line(k, v) for k, v in files.items()) + f"\n{dist}/RECORD,,\n"
    whl = f"{mod}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(root, "files", whl), "w", zipfile.ZIP_STORED) as z:
        for k, v in files.items():
            z.writestr(k, v)
        z.writestr(f"{dist}/RECORD", record)
    page = os.path.join(root, "simple", name)
    os.makedirs(page)
    with open(os.path.join(page, "index.html"), "w") as f:
        f.write(f'<html><body><a href="/files/{whl}">{whl}</a></body></html>\n')
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$WORK/index" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/simple/evb-pkg0/')" 2>/dev/null && break; sleep 0.1; done

S=$WORK/s
for f in cold warm; do mkdir -p "$S/$f/workspace"; echo evb-pkg0 > "$S/$f/workspace/requirements.txt"; done
# The agent times its own install (ms); a warm run checks that no earlier run's write is in
# the cache, then writes one.
cat > "$S/cold/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: cold
prompt: install
network: {allow: ["127.0.0.1:$port"]}
checks:
  - {id: installed, file: {path: ok, exists: true}}
YAML
cat > "$S/warm/fixture.yaml" <<YAML
schema: evalbox.fixture.v1
id: warm
prompt: install
caches:
  wheels:
    target: /home/agent/.cache/wheels
    warm: python3 -m pip download -q --index-url http://127.0.0.1:$port/simple -d /home/agent/.cache/wheels -r requirements.txt
    network: {allow: ["127.0.0.1:$port"]}
    max_bytes: 2GiB
checks:
  - {id: installed, file: {path: ok, exists: true}}
YAML
cat > "$S/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: cache-pip
fixtures: [cold, warm]
candidates:
  - id: pip
    adapter: command
    transcript: none
    argv:
      - sh
      - -c
      - |
        set -e
        test ! -e /home/agent/.cache/wheels/run-wrote || { echo "saw an earlier run's write"; exit 3; }
        t0=\$(date +%s%N)
        if [ -d /home/agent/.cache/wheels ]; then
          python3 -m pip install -q --no-index --find-links /home/agent/.cache/wheels -t /tmp/site -r requirements.txt
          echo written > /home/agent/.cache/wheels/run-wrote
        else
          python3 -m pip install -q --index-url http://127.0.0.1:$port/simple -t /tmp/site -r requirements.txt
        fi
        t1=\$(date +%s%N)
        test -f /tmp/site/evb_pkg$((N - 1))/__init__.py
        echo "install_ms \$(( (t1 - t0) / 1000000 ))"
        touch ok
trials: $TRIALS
concurrency: 1
YAML
t0=$(date +%s%N)
"$EVALBOX" cache warm "$S/suite.yaml" >/dev/null 2>"$WORK/warm.err" || { cat "$WORK/warm.err"; exit 1; }
warm_ms=$((($(date +%s%N) - t0) / 1000000))
"$EVALBOX" run "$S/suite.yaml" --results "$WORK/r" >/dev/null 2>"$WORK/run.err" || { cat "$WORK/run.err"; exit 1; }
python3 - "$WORK/r" "$N" "$SIZE" "$warm_ms" <<'PY'
import json, os, statistics, sys
root, n, size, warm_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
times = {"cold": [], "warm": []}
for line in open(os.path.join(root, "results.jsonl")):
    r = json.loads(line)
    assert r["verdict"] == "passed", (r["fixture"], r["execution"])
    out = open(os.path.join(root, "runs", r["run_id"], "native", "stdout.txt")).read().split()
    fixture = r["fixture"]["id"] if isinstance(r["fixture"], dict) else r["fixture"]
    times[fixture].append(int(out[out.index("install_ms") + 1]))
cold, warm = statistics.median(times["cold"]), statistics.median(times["warm"])
print(f"pip install of {n} packages ({size} KiB each), {len(times['warm'])} runs each:")
print(f"  cold, from the index through the sandbox's network: median {cold:.0f} ms {sorted(times['cold'])}")
print(f"  warm, from the cache, no network:                   median {warm:.0f} ms {sorted(times['warm'])}")
print(f"  warm / cold = {warm / cold:.2f}   (warming it once: {warm_ms} ms, cache warm included)")
print("  every warm run wrote into the cache; none saw an earlier run's write")
PY
