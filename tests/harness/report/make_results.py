#!/usr/bin/env python3
"""Writes a synthetic evalbox results directory for report tests: results.jsonl with
evalbox.run.v1 records, runs/<id>/{workspace.diff,transcript.jsonl}, and expected.json with
the counts a correct report must show.

  make_results.py OUT --fixtures 500 --trials 5 [--seed 7] [--files all|some]

Candidates: oracle (always passes, except one flaky fixture), baseline (per-fixture
difficulty), tuned (baseline + 0.15), and a noisy one whose id needs escaping. About 2% of
runs are infrastructure errors. Names, transcripts and diffs carry HTML that must be escaped.
"""
import argparse
import hashlib
import json
import os
import random

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--fixtures", type=int, default=6)
p.add_argument("--trials", type=int, default=3)
p.add_argument("--seed", type=int, default=7)
p.add_argument("--files", choices=["all", "some"], default="all")
a = p.parse_args()

rng = random.Random(a.seed)
NOISY = 'noisy<b>&"'
candidates = ["baseline", NOISY, "oracle", "tuned"]
fixtures = [f"fixture-{i:04d}" for i in range(a.fixtures)]
os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
expected = {"runs": 0, "passed": 0, "failed": 0, "errors": 0, "candidates": len(candidates),
            "cells": len(candidates) * len(fixtures), "comparisons": 2,
            "error_runs": [], "hostile_run": None}
difficulty = {f: rng.random() for f in fixtures}

with open(os.path.join(a.out, "results.jsonl"), "w") as out:
    for c in candidates:
        for fi, f in enumerate(fixtures):
            for t in range(a.trials):
                rid = hashlib.sha256(f"{c}/{f}/{t}".encode()).hexdigest()[:16]
                if c == "oracle":
                    prob = 0.5 if fi == 0 else 1.0
                elif c == "baseline":
                    prob = difficulty[f]
                elif c == "tuned":
                    prob = min(1.0, difficulty[f] + 0.15)
                else:
                    prob = 0.5
                # ~2% infrastructure errors, and always one (tuned, the second fixture, trial 0)
                error = c != "oracle" and (rng.random() < 0.02 or
                                           (c == "tuned" and fi == 1 % a.fixtures and t == 0))
                passed = not error and rng.random() < prob
                verdict = "not_assessed" if error else ("passed" if passed else "failed")
                checks = [] if error else [
                    {"id": "hidden-tests", "kind": "shell", "weight": 1, "passed": passed,
                     "detail": "" if passed else "1 test failed: <expected 42>"},
                    {"id": "tests-untouched", "kind": "git", "weight": 1, "passed": True,
                     "detail": ""}]
                rec = {
                    "schema": "evalbox.run.v1", "run_id": rid, "suite": "synthetic",
                    "fixture": {"id": f, "digest": "0" * 64},
                    "candidate": {"id": c, "adapter": "command", "digest": "0" * 64},
                    "trial": t, "attempts": 1,
                    "execution": {"status": "error" if error else "completed",
                                  "error": "sandbox: mount overlay: EINVAL <simulated>" if error
                                  else None,
                                  "error_kind": "sandbox" if error else None,
                                  "outcome": None if error else "exited",
                                  "exit_code": None if error else 0},
                    "grading": {"status": "skipped" if error else "completed", "checks": checks,
                                "score": None if error else (1.0 if passed else 0.5),
                                "threshold": 1.0, "error": None},
                    "verdict": verdict,
                    "usage": {"input_tokens": None if c == "oracle" else 400 + rng.randrange(600),
                              "output_tokens": None if c == "oracle" else 60 + rng.randrange(200),
                              "cached_input_tokens": None, "reasoning_tokens": None,
                              "cost_usd": None},
                    "timings": {"wall_ms": 200 + rng.randrange(5000)},
                }
                out.write(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
                expected["runs"] += 1
                if error:
                    expected["errors"] += 1
                    expected["error_runs"].append(rid)
                elif passed:
                    expected["passed"] += 1
                else:
                    expected["failed"] += 1
                if a.files == "some" and t > 0:
                    continue
                d = os.path.join(a.out, "runs", rid)
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "workspace.diff"), "w") as df:
                    df.write(f"--- a/{f}.py\n+++ b/{f}.py\n@@ -1 +1 @@\n-return a\n"
                             f"+return b  # </script><img src=x onerror=alert(1)>\n")
                steps = [
                    {"type": "header", "schema": "evalbox.transcript.v1", "agent": "command",
                     "session_id": rid, "model": "synthetic"},
                    {"type": "step", "index": 0, "source": "agent",
                     "message": "Running the tests <script>alert(2)</script>", "reasoning": "",
                     "tool_calls": [{"id": "c1", "tool": "shell", "input": {"command": "make test"},
                                     "command": "make test"}],
                     "observations": [{"call_id": "c1", "exit_code": 0 if passed else 1,
                                       "output": "ok" if passed else "FAIL: test_sum",
                                       "is_error": not passed}],
                     "metrics": None, "timestamp": ""},
                    {"type": "summary", "steps": 1},
                ]
                with open(os.path.join(d, "transcript.jsonl"), "w") as tf:
                    for s in steps:
                        tf.write(json.dumps(s, sort_keys=True, separators=(",", ":")) + "\n")
                if expected["hostile_run"] is None and not error:
                    expected["hostile_run"] = rid

with open(os.path.join(a.out, "expected.json"), "w") as e:
    json.dump(expected, e, indent=1)
