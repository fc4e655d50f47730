#!/bin/bash
# reward.json: the reward, and one named number per part (each becomes a score).
a=0; b=0
[ "$(cat a.txt 2>/dev/null)" = a ] && a=1
[ "$(cat b.txt 2>/dev/null)" = b ] && b=1
python3 -c "import json,sys; a,b=int(sys.argv[1]),int(sys.argv[2]); print(json.dumps({'reward': (a+b)/2, 'a': a, 'b': b}))" "$a" "$b" > /logs/verifier/reward.json
