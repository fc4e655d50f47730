#!/usr/bin/env python3
"""Turns Google Benchmark JSON files (scripts/bench) into a Markdown table with each figure's
ratio to the machine's floor measured in the same run, and the targets met or missed."""
import json
import re
import sys
from pathlib import Path


def clean(name):
    """cycle/net_none/medium/real_time -> cycle/net_none/medium"""
    return re.sub(r"/(real_time|manual_time|iterations:\d+)", "", name)


def load(paths):
    rows = {}
    floors = {}
    for path in paths:
        text = Path(path).read_text()
        # A suite none of whose benchmarks matched --filter writes nothing: it is not reported.
        if not text.strip():
            continue
        data = json.loads(text)
        for b in data.get("benchmarks", []):
            if b.get("error_occurred"):
                name = clean(b.get("run_name", b["name"]))
                rows.setdefault(name, {"skipped": b.get("error_message", "error")})
                continue
            # With repetitions keep the median; without, the single run.
            agg = b.get("aggregate_name")
            if agg and agg != "median":
                continue
            name = clean(b.get("run_name", b["name"]))
            if not agg and name in rows and "time_ms" in rows[name]:
                continue
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
            row = {"time_ms": b["real_time"] * scale, "binary": Path(path).stem}
            for k, v in b.items():
                counter = k.endswith(("_per_s", "_kb", "_per_run", "_tree", "files", "_speedup",
                                      "_cores_busy", "_ceiling"))
                # The pairs' counters (launch/agent/against_bwrap, .../against_unshare): each
                # side's median and the median ratio of the pairs.
                counter = counter or k.startswith("load_") or k == "ratio" or k.endswith("_ms")
                if counter and isinstance(v, (int, float)):
                    row[k] = v
            rows[name] = row
            if name.startswith("floor/fork_exec_true"):
                floors[Path(path).stem] = row["time_ms"]
    return rows, floors


def fmt_ms(x):
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def print_floors(scaling):
    """The machine's floors measured in the warm scaling rounds (bench/harness_bench.cpp)."""
    floors = (("spin", "computing alone (a loop in registers)"),
              ("spawn_true", "posix_spawn `/bin/true`, waited for"),
              ("unshare", "`unshare -Urmpn --fork --mount-proc /bin/true`"))
    if any(f"floor_{k}_c1_per_s" in scaling for k, _ in floors):
        print()
        print("| the machine's floor, in the same rounds | per s at concurrency 1 | × at 2 | × at 4 "
              "| machine's busy cores at 1 / 2 |")
        print("|---|---:|---:|---:|---:|")
        for key, what in floors:
            rate = scaling.get(f"floor_{key}_c1_per_s")
            if rate is None:
                continue
            nums = (scaling.get(f"floor_{key}_{k}")
                    for k in ("c2_speedup", "c4_speedup", "c1_cores_busy", "c2_cores_busy"))
            t2, t4, b1, b2 = (f"{v:.2f}" if v is not None else "—" for v in nums)
            print(f"| {what} | {rate:.1f} | {t2} | {t4} | {b1} / {b2} |")


def main():
    rows, floors = load(sys.argv[1:])
    base = next(iter(floors.values()), None)
    print("| benchmark | median ms | × fork+exec /bin/true | notes |")
    print("|---|---:|---:|---|")
    for name, r in rows.items():
        if "skipped" in r:
            print(f"| `{name}` | — | — | skipped: {r['skipped']} |")
            continue
        floor = floors.get(r["binary"], base)
        ratio = f"{r['time_ms'] / floor:.1f}" if floor else "—"
        # The machine's floors measured in the scaling rounds have a table of their own.
        notes = ", ".join(f"{k} {v:.2f}" if k == "ratio" else f"{k} {v:.1f}"
                          for k, v in r.items()
                          if k not in ("time_ms", "binary") and not k.startswith("floor_"))
        print(f"| `{name}` | {fmt_ms(r['time_ms'])} | {ratio} | {notes} |")

    def t(name):
        r = rows.get(name)
        return r.get("time_ms") if r else None

    def c(prefix, key):
        for name, r in rows.items():
            if name.startswith(prefix) and key in r:
                return r[key]
        return None

    def measured(prefix):  # the first row under `prefix` that has a time (not skipped)
        return next((r for name, r in rows.items() if name.startswith(prefix) and "time_ms" in r),
                    None)

    print()
    print("| target | figure | goal | verdict |")
    print("|---|---:|---:|---|")

    def target(what, value, goal, ok, unit=""):
        if value is None:
            print(f"| {what} | — | {goal} | not measured |")
            return
        print(f"| {what} | {value:.2f}{unit} | {goal} | {'met' if ok(value) else 'MISSED'} |")

    # The targets are judged in pairs (one of each, alternately, in one process: a guest's speed
    # drifts between benchmarks minutes apart); the unpaired medians follow for comparison.
    def paired(prefix, what, peer_key, peer, goal, ok):
        r = measured(prefix)
        ratio = r.get("ratio") if r else None
        sides = ""
        if r and "evalbox_ms" in r and peer_key in r:
            sides = f" ({r['evalbox_ms']:.2f} against {r[peer_key]:.2f} ms)"
        target(f"{what} ÷ {peer}, in pairs{sides}", ratio, goal, ok)

    paired("cycle/net_none/medium/against_unshare", "full cycle (medium)", "unshare_ms",
           "`unshare -Urmpn`", "≤ 2", lambda v: v <= 2)
    cyc, uns = t("cycle/net_none/medium"), t("floor/unshare_Urmpn_true")
    if cyc and uns:
        print(f"| full cycle (medium) ÷ `unshare -Urmpn`, unpaired medians | {cyc / uns:.2f} | — "
              "| judged in pairs (above) |")
    paired("launch/agent/against_bwrap", "in-process launch (agent)", "bwrap_agent_ms",
           "bwrap with the agent layout", "≤ 0.8", lambda v: v <= 0.8)
    large, small = t("prepare/overlay/large"), t("prepare/overlay/small")
    target("overlay prepare large ÷ small", large / small if large and small else None, "≤ 1.5",
           lambda v: v <= 1.5)
    for size in ("small", "medium", "large"):
        cp, cpa = t(f"prepare/copy/{size}"), t(f"floor/cp_a_rm_rf_tmpfs/{size}")
        target(f"copy prepare+teardown ÷ `cp -a`+`rm -rf` (tmpfs), {size}",
               cp / cpa if cp and cpa else None, "≤ 1.1", lambda v: v <= 1.1)
    # Harness rows: harness/run_noop/runs:N/concurrency:C.
    runs = {}
    for name, r in rows.items():
        m = re.fullmatch(r"harness/run_noop/runs:(\d+)/concurrency:(\d+)", name)
        if m and "time_ms" in r:
            runs[(int(m.group(1)), int(m.group(2)))] = r
    c1 = [n for (n, cc) in runs if cc == 1]
    n = max(c1) if c1 else None
    c2 = runs.get((n, 2)) if n else None
    target(f"harness noop runs/s, concurrency 2 ({n} runs)", c2["runs_per_s"] if c2 else None,
           "≥ 25", lambda v: v >= 25)
    sizes = sorted(k for (k, cc) in runs if cc == 2)
    for key, what in (("runs_rss_kb", "while running"), ("peak_rss_kb", "including reports")):
        lo = runs[(sizes[0], 2)].get(key) if sizes else None
        hi = runs[(sizes[-1], 2)].get(key) if sizes else None
        label = f"{sizes[-1]} ÷ {sizes[0]} runs" if sizes else ""
        target(f"runner peak RSS {what}, {label}", hi / lo if lo and hi else None, "≤ 1.10",
               lambda v: v <= 1.10)
    # harness/scaling/runs:N/rounds:R: concurrency 1, 2 and 4 interleaved, medians of rounds.
    scaling = measured("harness/scaling/")
    if scaling:
        speedup = scaling.get("c2_speedup")
        ceiling = scaling.get("speedup_ceiling")
        bound = f"; at most {ceiling:.2f}× with concurrency 1's busy cores" if ceiling else ""
        target("harness noop runs/s, concurrency 2 ÷ concurrency 1 (interleaved rounds, load "
               f"{scaling.get('load_before', 0):.1f} → {scaling.get('load_after', 0):.1f}{bound})",
               speedup, "≥ 1.7", lambda v: v >= 1.7, "×")
        # What the machine itself gives concurrency 2 in the same rounds: a sandbox is made of
        # address spaces and namespaces made and torn down, so evalbox's speed-up is read
        # against `unshare -Urmpn`'s (the floor) as well as against the absolute goal.
        floor = scaling.get("floor_unshare_c2_speedup")
        if speedup is not None and floor:
            spin = scaling.get("floor_spin_c2_speedup")
            spawn = scaling.get("floor_spawn_true_c2_speedup")
            print("| the same speed-up ÷ `unshare -Urmpn --fork --mount-proc /bin/true`'s at "
                  f"concurrency 2 in the same rounds ({floor:.2f}×; computing alone "
                  f"{spin or 0:.2f}×, posix_spawn `/bin/true` {spawn or 0:.2f}×) "
                  f"| {speedup / floor:.2f} | ≥ 1 | "
                  f"{'scales as the floor does' if speedup >= floor else 'scales less than the floor'} |")
    per_run = runs[(n, 1)].get("ms_per_run") if n else None
    bare = t("harness/bare_agent_plus_grading")
    if per_run and bare:
        print(f"| harness overhead per run (concurrency 1) over the bare sandboxes "
              f"({fmt_ms(bare)} ms) | {per_run - bare:.2f} ms | — | — |")
    cold = measured("harness/scaling_cold_helper/")
    cold_title = ", a helper started per launch (EVALBOX_WARM_HELPER=0)"
    for what, r in (("", scaling), (cold_title, cold)):
        if not r:
            continue
        print()
        print(f"| concurrency{what} | runs/s | × concurrency 1 "
              "| CPU ms per run (runner + helpers) | machine's busy cores |")
        print("|---:|---:|---:|---:|---:|")
        for c in (1, 2, 4):
            rate, cpu = r.get(f"c{c}_runs_per_s"), r.get(f"c{c}_cpu_ms_per_run")
            if rate is None:
                continue
            up = r.get(f"c{c}_speedup", 1.0)
            busy = r.get(f"c{c}_cores_busy")
            busy_text = f"{busy:.2f}" if busy is not None else "—"
            print(f"| {c} | {rate:.1f} | {up:.2f} | {cpu:.2f} | {busy_text} |")
        if r is scaling:
            print_floors(scaling)


if __name__ == "__main__":
    main()
