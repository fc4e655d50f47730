#!/usr/bin/env python3
"""Writes the seed corpora and dictionaries of tests/fuzz from the repository's golden files:
real Codex, Claude Code and Gemini CLI captures, evalbox.events.v1 and transcript.jsonl
samples, example fixtures and suites, a synthetic results.jsonl and run records.

  tests/fuzz/make_corpus.py        (from the repository root; rewrites corpus/ and dict/)

Seeds are kept small (long base instructions in Codex rollouts are cut) so that the whole
corpus stays a few hundred KiB. Inputs found by fuzzing live in regressions/, not here.
"""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
DICT = os.path.join(ROOT, "tests", "fuzz", "dict")


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


corpora = {}


def seed(target, data, name=None):
    if isinstance(data, str):
        data = data.encode()
    name = name or hashlib.sha1(data).hexdigest()[:16]
    corpora.setdefault(target, {})[name] = data


def lines(data):
    return [l for l in data.split(b"\n") if l.strip()]


def slim_rollout(data):
    """The lines of a Codex rollout that add_unreported_commands reads, payloads trimmed."""
    out = []
    for l in lines(data):
        try:
            j = json.loads(l)
        except ValueError:
            continue
        t, p = j.get("type"), j.get("payload") or {}
        if t == "session_meta":
            out.append({"type": t, "payload": {"id": p.get("id")}})
        elif t == "response_item" and p.get("type") in ("function_call", "function_call_output"):
            out.append(j)
    return b"\n".join(json.dumps(o, separators=(",", ":")).encode() for o in out) + b"\n"


# Agents' native streams.
for d in sorted(glob.glob(os.path.join(ROOT, "tests/data/transcripts/codex/*"))):
    name = os.path.basename(d)
    events = read(os.path.join(d, "events.jsonl"))
    seed("codex_stream", events, name)
    seed("codex_stream", events + b"\0" + slim_rollout(read(os.path.join(d, "native.jsonl"))),
         name + "-rollout")
denied = "tests/adapters/codex/data/sandbox-denied"
seed("codex_stream", read(denied + "/events.jsonl") + b"\0" +
     slim_rollout(read(denied + "/native.jsonl")), "sandbox-denied-rollout")
for d in sorted(glob.glob(os.path.join(ROOT, "tests/data/transcripts/claude/*"))):
    seed("claude_stream", read(os.path.join(d, "events.jsonl")), os.path.basename(d))

# Gemini CLI: the capture in tests/adapters/gemini/gemini_test.cpp, and the shapes its header
# documents (an error result, a failed tool, no result: a stopped client).
src = read("tests/adapters/gemini/gemini_test.cpp").decode()
capture = re.search(r'R"\((\{"type":"init".*?)\)"', src, re.S).group(1)
seed("gemini_stream", capture, "single")
ev = [json.loads(l) for l in lines(capture.encode())]
seed("gemini_stream", "\n".join(json.dumps(e) for e in ev[:-1]) + "\n", "stopped")
failed = [dict(e) for e in ev]
failed[3] = {"type": "tool_result", "tool_id": ev[2]["tool_id"], "status": "error",
             "error": {"type": "shell", "message": "permission denied"}}
failed[-1] = {"type": "result", "status": "error", "error": {"message": "HTTP 500"},
              "stats": {"total_tokens": 1, "duration_ms": 5}}
seed("gemini_stream", "\n".join(json.dumps(e) for e in failed) + "\n", "error")

# evalbox.events.v1 and transcript.jsonl.
for f in sorted(glob.glob(os.path.join(ROOT, "tests/data/transcripts/evalbox/*/events.jsonl"))):
    seed("evalbox_events", read(f), os.path.basename(os.path.dirname(f)))
seed("evalbox_events", "\n".join(json.dumps(e) for e in [
    {"type": "header", "schema": "evalbox.events.v1", "session_id": "s", "model": "m"},
    {"type": "tool_call", "id": "c1", "tool": "mcp__srv__t", "input": {"command": "ls"}},
    {"type": "tool_result", "id": "c2", "exit_code": 2, "output": "x" * 40},
    {"type": "usage", "input_tokens": 1, "output_tokens": 2, "cost_usd": 0.5},
    {"type": "error", "message": "upstream 500"},
]) + "\n", "error-no-final")
for f in sorted(glob.glob(os.path.join(ROOT, "tests/data/transcripts/*/*/normalized.jsonl"))):
    parts = f.split(os.sep)
    seed("transcript_jsonl", read(f), parts[-3] + "-" + parts[-2])

# results.jsonl: the synthetic results directory the report tests use.
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(ROOT, "tests/harness/report/make_results.py"),
                    tmp, "--fixtures", "2", "--trials", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    results = read(os.path.join(tmp, "results.jsonl"))
seed("results_jsonl", results, "synthetic")
rs = lines(results)
seed("results_jsonl", b"\n".join(rs[:3]) + b"\n" + rs[3][:40], "torn-last-line")

# Run records (evalbox.run-record.v1, docs/run-record.md).
base = {"schema": "evalbox.run-record.v1", "outcome": "exited", "exit_code": 0, "signal": None,
        "wall_ms": 12, "cpu_ms": 3, "peak_memory_bytes": 1 << 20, "output_bytes": 5,
        "output_truncated": False, "pids_limit_hit": False,
        "mechanisms": {"user_ns": True, "landlock_abi": 4, "cgroup": "v1", "network": "none"},
        "binding_digest": "sha256:00", "connections": [], "error": None, "error_step": None}
seed("run_record", json.dumps(base), "exited")
seed("run_record", json.dumps(dict(base, outcome="signaled", exit_code=None, signal=9)),
     "signaled")
seed("run_record", json.dumps(dict(base, outcome=None, exit_code=None, error="clone3: EPERM",
                                   error_step="clone")), "error")
seed("run_record", json.dumps(dict(base, outcome="output_limit", output_truncated=True,
                                   connections=[{"target": "127.0.0.1:80", "allowed": False,
                                                 "via": "relay", "detail": "refused"}])),
     "connections")

# YAML: the example fixtures and suites, and the config error cases.
for f in sorted(glob.glob(os.path.join(ROOT, "fixtures/examples/*/fixture.yaml"))):
    seed("fixture_yaml", read(f), os.path.basename(os.path.dirname(f)))
for f in sorted(glob.glob(os.path.join(ROOT, "tests/data/config/fixture/*.yaml"))):
    seed("fixture_yaml", read(f), os.path.basename(f)[:-5])
for f in sorted(glob.glob(os.path.join(ROOT, "tests/agents/e2e/*/fixture.yaml"))):
    seed("fixture_yaml", read(f), "e2e-" + os.path.basename(os.path.dirname(f)))
# Suites are parsed against a scratch directory holding fx/one and home.toml.
for f in ["fixtures/examples/suite.yaml", "fixtures/examples/noisy-suite.yaml"]:
    text = read(f).decode()
    text = re.sub(r"^fixtures:.*$", 'fixtures: ["fx/*"]', text, flags=re.M)
    seed("suite_yaml", text, os.path.basename(f)[:-5])
for f in sorted(glob.glob(os.path.join(ROOT, "tests/data/config/suite/*.yaml"))):
    seed("suite_yaml", read(f), os.path.basename(f)[:-5])

# Test reports a tests: check reads (pytest -rA and -v output, JUnit XML), from a real pytest run.
for f in sorted(glob.glob(os.path.join(ROOT, "tests/harness/grading/data/*"))):
    seed("test_report", read(f), os.path.basename(f))
seed("test_report", b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x "y">]><testsuites><testsuite>'
     b'<testcase classname="a.b" name="c[x y]"><skipped/></testcase></testsuite></testsuites>',
     "entities")

# Dictionaries: the keys and type names of each format, taken from the seeds (raw bytes).
def json_tokens(blobs):
    toks = set()
    for b in blobs:
        for m in re.finditer(rb'"([A-Za-z_][A-Za-z0-9_.:-]{1,40})"', b):
            toks.add(m.group(0))
    # Values at the edges of the types the readers convert to.
    return toks | {b"1e400", b"-1", b"-0.5", b"2147483648", b"18446744073709551616", b"1e19",
                   b"null", b"true", b"[]", b"{}", b'"\\u0000"', b'"\\ud800"'}


def yaml_tokens(blobs):
    toks = set()
    for b in blobs:
        for m in re.finditer(rb"(?m)^[ -]*([a-z_]+):", b):
            toks.add(m.group(1) + b":")
        for m in re.finditer(rb"[{,] *([a-z_]+):", b):
            toks.add(m.group(1) + b":")
    return toks | {b"evalbox.fixture.v1", b"evalbox.suite.v1", b"- ", b": ", b"{", b"}", b"[",
                   b"]", b"|\n", b"&a ", b"*a", b"!!str ", b"~", b"null", b"true", b"1GiB",
                   b"10m", b"\n  "}


def dict_entry(token):
    """A libFuzzer dictionary line: the token quoted, with \\, \" and bytes escaped."""
    out = b""
    for c in token:
        ch = bytes([c])
        if ch in (b"\\", b'"'):
            out += b"\\" + ch
        elif 32 <= c < 127:
            out += ch
        else:
            out += b"\\x%02x" % c
    return b'"' + out + b'"\n'


shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(DICT, exist_ok=True)
for target, seeds in sorted(corpora.items()):
    os.makedirs(os.path.join(OUT, target))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, target, name), "wb") as f:
            f.write(data)
    if target == "test_report":
        toks = {b"PASSED ", b"FAILED ", b"ERROR ", b"SKIPPED ", b"XFAIL ", b"XPASS ", b"::",
                b" - ", b"\x1b[32m", b"\x1b[0m", b"[ 50%]", b"<testcase", b"<testsuite>",
                b"classname=", b"name=", b"<failure/>", b"<error>", b"<skipped/>", b"/>",
                b"</testcase>", b"<!ENTITY", b"<!DOCTYPE", b"&amp;", b"<![CDATA["}
    else:
        toks = yaml_tokens(seeds.values()) if target.endswith("_yaml") else \
            json_tokens(seeds.values())
    if target == "codex_stream":
        toks.add(b"\0")  # the separator between the stream and the rollout
    with open(os.path.join(DICT, target + ".dict"), "wb") as f:
        f.write(b"# Generated by tests/fuzz/make_corpus.py from the seeds of corpus/"
                + target.encode() + b".\n")
        for t in sorted(toks):
            f.write(dict_entry(t))
    print(f"{target}: {len(seeds)} seeds, {len(toks)} dictionary entries")
