#!/usr/bin/env python3
"""Writes the seed corpora and dictionaries of tests/fuzz from the repository's golden files:
real Codex, Claude Code and Gemini CLI captures, evalbox.events.v1 and transcript.jsonl
samples, example fixtures and suites, a synthetic results.jsonl and run records, image
metadata and layer tars.

  tests/fuzz/make_corpus.py        (from the repository root; rewrites corpus/ and dict/)

Seeds are kept small (long base instructions in Codex rollouts are cut) so that the whole
corpus stays a few hundred KiB. Inputs found by fuzzing live in regressions/, not here.
"""
import glob
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
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
seed("run_record", json.dumps(dict(base, outcome="oom_killed", exit_code=None, oom_kills=2,
                                   disk_limit_hit=True,
                                   mechanisms=dict(base["mechanisms"], root={
                                       "kind": "image", "image": "sha256:" + "ab" * 32}))),
     "oom-disk-image")

# Image metadata (sandbox/image/oci.h): an OCI index, manifest and config, a Docker v2 manifest
# and docker-archive's manifest.json, and a few refused forms.
D = "sha256:" + "ab" * 32
E = "sha256:" + "cd" * 32
seed("oci_json", json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                            "digest": D, "size": 400,
                                            "platform": {"os": "linux", "architecture": "amd64"},
                                            "annotations": {"org.opencontainers.image.ref.name": "latest"}},
                                           {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                            "digest": E, "size": 400,
                                            "platform": {"os": "linux", "architecture": "arm64",
                                                         "variant": "v8"}}]}), "index")
seed("oci_json", json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                             "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                        "digest": D, "size": 700},
                             "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                         "digest": E, "size": 1234},
                                        {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd",
                                         "digest": D, "size": 99}]}), "manifest")
seed("oci_json", json.dumps({"schemaVersion": 2,
                             "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                             "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                                        "digest": D, "size": 700},
                             "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                                         "digest": E, "size": 1234}]}), "docker-manifest")
seed("oci_json", json.dumps({"architecture": "amd64", "os": "linux",
                             "config": {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
                                        "Entrypoint": ["/bin/sh"], "Cmd": ["-c", "true"],
                                        "WorkingDir": "/app", "User": "1000:1000"},
                             "rootfs": {"type": "layers", "diff_ids": [D, E]},
                             "history": [{"created_by": "RUN true"}]}), "config")
seed("oci_json", json.dumps([{"Config": "abc.json", "RepoTags": ["localhost/app:latest"],
                              "Layers": ["abc/layer.tar", "def/layer.tar"]}]), "docker-archive")
seed("oci_json", json.dumps({"architecture": "amd64", "os": "linux",
                             "rootfs": {"type": "layers", "diff_ids": ["md5:00"]}}), "bad-digest")
seed("oci_json", '{"manifests": [{"digest": "' + D + '", "size": -1}]}', "negative-size")
# What registries serve besides: a Docker manifest list, an index with no image for this host
# (only other platforms, a Windows os.version), an index naming an index, a schema 1 manifest.
seed("oci_json", json.dumps({"schemaVersion": 2,
                             "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
                             "manifests": [{"mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                            "digest": D, "size": 528,
                                            "platform": {"os": "linux", "architecture": "amd64"}},
                                           {"mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                                            "digest": E, "size": 528,
                                            "platform": {"os": "linux", "architecture": "arm",
                                                         "variant": "v7"}}]}), "docker-list")
seed("oci_json", json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                            "digest": D, "size": 577,
                                            "platform": {"os": "linux", "architecture": "s390x"}},
                                           {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                            "digest": D, "size": 577,
                                            "platform": {"os": "windows", "architecture": "amd64",
                                                         "os.version": "10.0.17763.1234"}}]}),
     "no-platform")
seed("oci_json", json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                             "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
                                            "digest": E, "size": 300}]}), "nested-index")
seed("oci_json", json.dumps({"schemaVersion": 1, "name": "library/busybox", "tag": "latest",
                             "architecture": "amd64", "fsLayers": [{"blobSum": D}]}), "schema1")

# Layer blobs (sandbox/image/layer.h): tars with every entry type the writer handles, the
# whiteout and opaque markers, and the hostile forms it must refuse; gzip and zstd forms.
def make_tar(items):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, arg in items:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            ti.uid = ti.gid = 0
            data = None
            if kind == "f":
                data = arg.encode()
                ti.size = len(data)
                ti.mode = 0o644
            elif kind == "d":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif kind == "l":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, arg, 0o777
            elif kind == "h":
                ti.type, ti.linkname = tarfile.LNKTYPE, arg
            elif kind == "p":
                ti.type = tarfile.FIFOTYPE
            elif kind == "c":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            elif kind == "x":  # setuid file with a file capability xattr
                data = b"#!/bin/sh\n"
                ti.size, ti.mode = len(data), 0o4755
                ti.pax_headers = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02",
                                  "SCHILY.xattr.user.note": "kept"}
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


base_layer = make_tar([("etc/", "d", None), ("etc/os-release", "f", "ID=fuzz\n"),
                       ("usr/", "d", None), ("usr/bin/", "d", None),
                       ("usr/bin/tool", "x", None), ("bin", "l", "usr/bin"),
                       ("usr/bin/alias", "h", "usr/bin/tool"), ("run/fifo", "p", None),
                       ("opt/data/", "d", None), ("opt/data/a", "f", "a")])
seed("layer_tar", base_layer, "base")
seed("layer_tar", make_tar([("etc/.wh.os-release", "f", ""), ("opt/data/.wh..wh..opq", "f", ""),
                            ("opt/data/b", "f", "b"), ("dev/null", "c", None)]), "whiteouts")
seed("layer_tar", gzip.compress(base_layer, mtime=0), "base.gz")
seed("layer_tar", subprocess.run(["zstd", "-q", "-c"], input=base_layer, check=True,
                                 stdout=subprocess.PIPE).stdout, "base.zst")
seed("layer_tar", make_tar([("../escape", "f", "x")]), "dotdot")
seed("layer_tar", make_tar([("/abs", "f", "x")]), "absolute")
seed("layer_tar", make_tar([("link", "l", "../beside"), ("link/planted", "f", "x")]),
     "through-symlink")
seed("layer_tar", make_tar([("out", "h", "../../etc/passwd")]), "hardlink-out")
seed("layer_tar", gzip.compress(base_layer, mtime=0)[:200], "truncated.gz")

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

# A judge's answers (ids p1..p3): valid raw JSON and fenced blocks, and each malformed shape
# the reader refuses (missing, extra and repeated ids, wrong types, prose, two fences).
def judge_answer(checks, fence=None):
    text = json.dumps({"checks": checks})
    return text if fence is None else "```" + fence + "\n" + text + "\n```"


ok3 = [{"id": f"p{i}", "verdict": v, "reason": f"reason {i}"}
       for i, v in ((1, "pass"), (2, "fail"), (3, "pass"))]
seed("judge_answer", judge_answer(ok3), "raw")
seed("judge_answer", judge_answer(ok3, "json"), "fenced-json")
seed("judge_answer", judge_answer(ok3, ""), "fenced")
seed("judge_answer", judge_answer(ok3[:2]), "missing")
seed("judge_answer", judge_answer(ok3 + [dict(ok3[0], id="p4")]), "extra")
seed("judge_answer", judge_answer(ok3 + [ok3[0]]), "repeated")
seed("judge_answer", judge_answer([dict(ok3[0], verdict=True)] + ok3[1:]), "wrong-type")
seed("judge_answer", judge_answer([dict(ok3[0], reason="")] + ok3[1:]), "empty-reason")
seed("judge_answer", "Everything passes.", "prose")
seed("judge_answer", judge_answer(ok3, "json") + "\n" + judge_answer(ok3, "json"), "two-fences")

# Harbor task.toml files: the integration test's tasks and the hand-written seeds in
# tests/fuzz/seeds/task_toml/ (both layouts, wrong types, unknown keys, a syntax error).
for f in sorted(glob.glob(os.path.join(ROOT, "tests/integration/harbor-tasks/*/task.toml"))):
    seed("task_toml", read(f), "it-" + os.path.basename(os.path.dirname(f)))
for f in sorted(glob.glob(os.path.join(ROOT, "tests/fuzz/seeds/task_toml/*"))):
    seed("task_toml", read(f), os.path.basename(f))

# Image references and WWW-Authenticate challenges: the hand-written seeds in
# tests/fuzz/seeds/<target>/ (each transport, registry names and their malformed forms; Docker
# Hub's and ghcr.io's challenges, escapes, Basic, and the malformed ones a hostile registry sends).
# Session protocol lines (docs/sessions.md): every op, and malformed ones. A kept final state's
# manifest (docs/results.md): every kind of entry, and a hostile one. The model gateway's
# responses (harness/gateway/usage.h): each API's stream and body as the APIs document them and
# tests/agents/stub_model.py sends them, their errors, the SSE reader's edge cases, hostile numbers.
for target in ("registry_reference", "www_authenticate", "session_request", "final_state",
               "gateway_sse", "gateway_usage"):
    for f in sorted(glob.glob(os.path.join(ROOT, "tests/fuzz/seeds", target, "*"))):
        seed(target, read(f), os.path.basename(f))

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
                   b"10m", b"\n  ",
                   # suite keys no seed holds yet: Harbor task images and threshold
                   b"images:", b"harbor:", b"threshold:"}


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
    if target == "layer_tar":
        continue  # binary: libFuzzer's own comparisons find the tar fields, no dictionary
    if target == "test_report":
        toks = {b"PASSED ", b"FAILED ", b"ERROR ", b"SKIPPED ", b"XFAIL ", b"XPASS ", b"::",
                b" - ", b"\x1b[32m", b"\x1b[0m", b"[ 50%]", b"<testcase", b"<testsuite>",
                b"classname=", b"name=", b"<failure/>", b"<error>", b"<skipped/>", b"/>",
                b"</testcase>", b"<!ENTITY", b"<!DOCTYPE", b"&amp;", b"<![CDATA["}
    elif target == "task_toml":
        toks = {b"version", b"schema_version", b"[metadata]", b"[task]", b"[verifier]",
                b"[agent]", b"[solution]", b"[environment]", b"[[steps]]", b"name",
                b"timeout_sec", b"env", b"docker_image", b"build_timeout_sec", b"cpus",
                b"memory", b"memory_mb", b"storage", b"storage_mb", b"gpus", b"allow_internet",
                b"network_mode", b'"no-network"', b'"public"', b'"2G"', b'"512M"', b"= true",
                b"= false", b"= {", b"= [", b'"""', b"'''", b"1e400", b"-1",
                b"9223372036854775808", b"inf", b"nan", b"1979-05-27T07:32:00Z"}
    elif target == "registry_reference":
        toks = {b"docker://", b"oci:", b"oci-archive:", b"docker-archive:", b"rootfs:",
                b"docker.io/", b"index.docker.io/", b"library/", b"localhost", b"127.0.0.1:",
                b"[::1]", b":5000/", b":latest", b"@sha256:", b"sha256:" + b"a" * 64, b"/../",
                b"./", b"__", b"--", b"py"}
    elif target == "www_authenticate":
        toks = {b"Bearer ", b"Basic ", b"realm=", b"service=", b"scope=", b"error=",
                b"error_description=", b'"', b'\\"', b"\\\\", b",", b", ", b"=", b"\t",
                b"repository:", b":pull", b"https://"}
    else:
        toks = yaml_tokens(seeds.values()) if target.endswith("_yaml") else \
            json_tokens(seeds.values())
    if target == "codex_stream":
        toks.add(b"\0")  # the separator between the stream and the rollout
    if target == "gateway_sse":  # the text/event-stream framing around the JSON
        toks |= {b"event: ", b"data: ", b"data:", b": ", b"id: ", b"retry: ", b"\r\n", b"\r",
                 b"\n\n", b"[DONE]", b"\xef\xbb\xbf", b"message_stop", b"response.completed"}
    with open(os.path.join(DICT, target + ".dict"), "wb") as f:
        f.write(b"# Generated by tests/fuzz/make_corpus.py from the seeds of corpus/"
                + target.encode() + b".\n")
        for t in sorted(toks):
            f.write(dict_entry(t))
    print(f"{target}: {len(seeds)} seeds, {len(toks)} dictionary entries")
