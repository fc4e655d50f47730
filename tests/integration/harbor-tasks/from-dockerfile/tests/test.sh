#!/bin/bash
# The image is the one the Dockerfile built (its RUN step left a file), and the answer is right.
if [ -f /app/built-by-dockerfile ] && [ "$(cat /app/answer.txt 2>/dev/null)" = "HELLO FROM THE DOCKERFILE" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
