#!/bin/bash
# The verifier, in Terminal-Bench's shape: no `set -e`, the reward written whatever happens.
# GREETING comes from [verifier] env; ctrf.json is a report the run directory keeps.
if [ "$(cat hello.txt 2>/dev/null)" = "$GREETING" ]; then
  echo 1 > /logs/verifier/reward.txt
  status=passed
else
  echo 0 > /logs/verifier/reward.txt
  status=failed
fi
printf '{"results": {"tests": [{"name": "hello", "status": "%s"}]}}\n' "$status" > /logs/verifier/ctrf.json
echo "verifier: hello.txt $status"
