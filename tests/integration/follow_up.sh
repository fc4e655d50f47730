# A fixture's follow_up prompt reaches the agent in a second launch of the same session: the
# workspace keeps the first launch's work, and both launches' transcripts are kept. Also: the
# run.json contract, and cost estimated from the suite's price table when the agent reports none.
source "$(dirname "$0")/lib.sh"
need_isolation
mkdir -p "$WORK/s/fx/workspace" "$WORK/s/fx/bin" "$WORK/s/agents"
# The fixture's bin/ is on the agent's PATH, read-only.
printf '#!/bin/sh\necho from-bin\n' > "$WORK/s/fx/bin/fixture-tool"
chmod +x "$WORK/s/fx/bin/fixture-tool"
cat > "$WORK/s/fx/fixture.yaml" <<'YAML'
schema: evalbox.fixture.v1
id: two-turns
prompt: first
follow_up: second
checks:
  - {id: both, file: {path: log.txt, equals: "first\nsecond\n"}}
  - {id: bin-on-path, file: {path: tool.txt, equals: "from-bin\n"}}
  - {id: bin-read-only, file: {path: bin-writable.txt, absent: true}}
YAML
cat > "$WORK/s/agents/echo.sh" <<'SH'
#!/bin/sh
echo "$EVALBOX_PROMPT" >> log.txt
fixture-tool > tool.txt
touch /evalbox/bin/planted 2>/dev/null && echo yes > bin-writable.txt
printf '{"type":"tool_call","id":"c%s","tool":"shell","input":{"command":"echo %s"}}\n' "$EVALBOX_PROMPT" "$EVALBOX_PROMPT"
printf '{"type":"usage","input_tokens":500000,"output_tokens":50000}\n'
SH
chmod +x "$WORK/s/agents/echo.sh"
cat > "$WORK/s/suite.yaml" <<'YAML'
schema: evalbox.suite.v1
name: follow
fixtures: [fx]
candidates:
  - {id: echo, adapter: command, argv: [agents/echo.sh], transcript: jsonl}
prices: {echo: {input_per_mtok: 2, output_per_mtok: 10}}
YAML
"$EVALBOX" run "$WORK/s/suite.yaml" --results "$WORK/r" >/dev/null 2>"$WORK/err" || { cat "$WORK/err"; fail "run failed"; }
python3 - "$WORK/r" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1] + "/results.jsonl")]
assert len(r) == 1 and r[0]["verdict"] == "passed", r
assert set(r[0]["execution"]["records"]) >= {"agent", "follow-up"}, r[0]["execution"]["records"].keys()
# The evalbox.run.v1 contract (docs/results.md): these keys, no more, no fewer.
assert set(r[0]) == {"schema", "run_id", "suite", "fixture", "candidate", "trial", "attempts",
                     "environment", "execution", "grading", "verdict", "usage", "judge_usage",
                     "timings", "final_state", "gateway"}, sorted(r[0])
assert set(r[0]["fixture"]) == {"id", "digest", "task_digest"}, r[0]["fixture"]
assert len(r[0]["grading"]["digest"]) == 64, r[0]["grading"]
assert r[0]["judge_usage"] is None, r[0]["judge_usage"]  # no judge check: nothing judged
assert r[0]["environment"] is None, r[0]["environment"]  # no image: the host's root
assert set(r[0]["execution"]) == {"status", "error", "error_kind", "session", "outcome", "exit_code",
                                      "records"}
assert set(r[0]["grading"]) == {"status", "checks", "score", "threshold", "error", "digest"}
assert set(r[0]["usage"]) == {"input_tokens", "output_tokens", "cached_input_tokens",
                              "reasoning_tokens", "cost_usd", "cost_source"}
# The agent reported tokens but no cost: the suite's price table estimates it, and says so.
u = r[0]["usage"]
assert u["input_tokens"] == 1000000 and u["output_tokens"] == 100000, u
assert abs(u["cost_usd"] - 3.0) < 1e-9 and u["cost_source"] == "price_table", u
run = sys.argv[1] + "/runs/" + r[0]["run_id"]
steps = [json.loads(l) for l in open(run + "/transcript.jsonl") if '"step"' in l]
cmds = [c.get("command") for s in steps for c in s.get("tool_calls", [])]
assert cmds == ["echo first", "echo second"], cmds
# workspace.diff shows what the agent changed since setup.
diff = open(run + "/workspace.diff").read()
assert "+++ b/log.txt" in diff and "+first" in diff and "+second" in diff, diff
PY
no_residue
echo "follow-up: ok"
