# The real Codex CLI and Claude Code inside images, against the stub model: in the Debian image
# and in the busybox image (no glibc). The clients come from the host's agent cache, mounted
# read-only; Codex's static binary runs as it is, Claude Code's through the host's loader and
# libraries at /opt/evalbox/host; the commands they run come from the image (the stub has them
# print the image's /etc/os-release). Codex passes in both images, Claude Code in Debian's; the
# run records name the image. A client that cannot work in an image is refused by `evalbox
# validate` and by the run before it starts: Claude Code in busybox (its Bash tool needs bash or
# zsh, busybox has neither), Gemini CLI in busybox (a Node script; no Node there).
source "$(dirname "$0")/lib.sh" "$@"
need_isolation
install_agents
BB=$("$SRC/tests/images/make-images" busybox)
DEB=$("$SRC/tests/images/make-images" debian)

start_stub --final "Created out.txt containing hello." \
  --command "echo hello > out.txt; grep ^ID= /etc/os-release; test -e /etc/debian_version && echo has-debian-version; true"
mkdir -p "$WORK/s"
for img in debian busybox; do
  cp -r "$SRC/tests/agents/e2e/hello" "$WORK/s/hello-$img"
  sed -i "s/^id: hello$/id: hello-$img/" "$WORK/s/hello-$img/fixture.yaml"
done
printf 'environment: {image: "oci:%s/oci:latest"}\n' "$DEB" >>"$WORK/s/hello-debian/fixture.yaml"
printf 'environment: {image: "oci:%s/oci:latest"}\n' "$BB" >>"$WORK/s/hello-busybox/fixture.yaml"
cat >"$WORK/s/suite.yaml" <<YAML
schema: evalbox.suite.v1
name: image-agents
fixtures: [hello-debian, hello-busybox]
candidates:
  - id: codex
    adapter: codex
    model: gpt-5.5
    provider: {base_url: "http://127.0.0.1:$STUB_PORT/v1", wire_api: responses}
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
  - id: claude
    adapter: claude-code
    base_url: "http://127.0.0.1:$STUB_PORT"
    env: {ANTHROPIC_API_KEY: not-a-secret}
    permission_mode: bypass
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
concurrency: 2
YAML

set +e
"$EVALBOX" validate "$WORK/s/suite.yaml" >"$WORK/validate" 2>"$WORK/validate.err"
vrc=$?
set -e
[ "$vrc" = 64 ] || fail "validate: exit $vrc, expected 64 (Claude Code cannot run in busybox)"
[ "$(grep -c "cannot run in fixture" "$WORK/validate.err")" = 1 ] &&
  grep -q "candidate claude cannot run in fixture hello-busybox's image: Claude Code runs its shell commands with bash or zsh, and the image oci:$BB/oci:latest has no bash or zsh" "$WORK/validate.err" ||
  fail "validate: $(cat "$WORK/validate.err")"
R=$WORK/results
set +e
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$R" >"$WORK/out" 2>"$WORK/err"
rc=$?
set -e
# 2: Claude Code in busybox is an execution error (refused); everything else passed.
[ "$rc" = 2 ] || { cat "$WORK/out" "$WORK/err" >&2; for f in "$R"/runs/*/native/stderr.txt; do echo "== $f" >&2; tail -20 "$f" >&2; done; fail "evalbox run exited $rc"; }
python3 - "$R" <<'PY'
import json, sys
R = sys.argv[1]
rows = [json.loads(l) for l in open(f"{R}/results.jsonl")]
assert len(rows) == 4, len(rows)
for r in rows:
    cid, fid = r["candidate"]["id"], r["fixture"]["id"]
    if (cid, fid) == ("claude", "hello-busybox"):
        e = r["execution"]
        assert e["status"] == "error" and e["error_kind"] == "adapter", e
        assert "bash or zsh" in e["error"] and e["records"] == {} and r["attempts"] == 1, e
        continue
    assert r["execution"]["status"] == "completed", (cid, fid, r["execution"])
    assert r["verdict"] == "passed", (cid, fid, r["grading"])
    assert r["environment"]["image"].endswith("/oci:latest"), r["environment"]
    root = r["execution"]["records"]["agent"]["mechanisms"]["root"]
    assert root["kind"] == "image" and root["image"] == r["environment"]["id"], root
    steps = [json.loads(l) for l in open(f"{R}/runs/{r['run_id']}/transcript.jsonl")]
    out = "".join(o.get("output", "") for s in steps if s.get("type") == "step"
                  for o in s.get("observations", []))
    want = "ID=debian" if fid == "hello-debian" else "ID=evalbox-busybox"
    assert want in out, (cid, fid, out)
    # The image's own files, not the host's (a Debian host has /etc/debian_version).
    assert ("has-debian-version" in out) == (fid == "hello-debian"), (cid, fid, out)
PY
no_residue

# Gemini CLI is a Node script: these images have no node, so it is refused up front.
cat >"$WORK/s/gemini.yaml" <<YAML
schema: evalbox.suite.v1
name: image-gemini
fixtures: [hello-busybox]
candidates:
  - id: gemini
    adapter: gemini
    base_url: "http://127.0.0.1:$STUB_PORT"
    api_key_env: EVALBOX_GEMINI_KEY
    network: {allow: ["127.0.0.1:$STUB_PORT"]}
YAML
set +e
export EVALBOX_GEMINI_KEY=not-a-secret
"$EVALBOX" validate "$WORK/s/gemini.yaml" >"$WORK/gv.out" 2>"$WORK/gv.err"
vrc=$?
"$EVALBOX" run "$WORK/s/gemini.yaml" --results "$WORK/gr" >"$WORK/gr.out" 2>"$WORK/gr.err"
grc=$?
set -e
[ "$vrc" = 64 ] || fail "validate of a Node client in busybox: exit $vrc ($(cat "$WORK/gv.err"))"
grep -q "candidate gemini cannot run in fixture hello-busybox's image" "$WORK/gv.err" &&
  grep -q "no node on its PATH" "$WORK/gv.err" || fail "validate: $(cat "$WORK/gv.err")"
[ "$grc" = 2 ] || fail "run of a Node client in busybox: exit $grc"
python3 - "$WORK/gr/results.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
e = r["execution"]
assert e["status"] == "error" and e["error_kind"] == "adapter", e
assert "no node on its PATH" in e["error"] and r["attempts"] == 1, e
assert e["records"] == {}, e["records"]  # refused before anything ran
PY
no_residue
echo "agents in images: ok"
