# Hidden from the agent: the test scripts an `ls /grader` that must fail.
[ "$(cat /workspace/out.txt)" = hello ]
