#!/bin/bash
# The manifests `evalbox k8s` writes validate offline against the Kubernetes OpenAPI schema of
# batch/v1 Job: the npm package kubernetes-models (its Job class's validate(), generated from
# the schema: types, enums, required fields), installed from the npm registry into
# /var/cache/evalbox/k8s-validate once. kubernetes-models accepts unknown fields, so the
# fields evalbox relies on are also checked by name. A manifest broken on purpose must fail.
# usage: k8s_validate.sh EVALBOX SOURCE_DIR
set -euo pipefail
evalbox=$1 src=$2
version=4.5.1  # engines: node >= 14 (5.x asks for node 22; Debian and this machine have 20)
cache=/var/cache/evalbox/k8s-validate
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
skip() {
  if [ "${EVALBOX_REQUIRE_ISOLATION:-0}" = 1 ]; then
    echo "FAIL: $1 (EVALBOX_REQUIRE_ISOLATION=1: this test may not skip)" >&2
    exit 1
  fi
  echo "SKIP: $1" >&2
  exit 77
}
command -v node >/dev/null && command -v npm >/dev/null || skip "node and npm are not installed"
if [ ! -f "$cache/node_modules/kubernetes-models/package.json" ] ||
   [ "$(node -p "require('$cache/node_modules/kubernetes-models/package.json').version")" != "$version" ]; then
  mkdir -p "$cache"
  echo '{"private": true}' >"$cache/package.json"
  if ! (cd "$cache" && timeout 300 npm install --no-audit --no-fund --loglevel=error \
          "kubernetes-models@$version" >"$work/npm.log" 2>&1); then
    cat "$work/npm.log" >&2
    npm ping >/dev/null 2>&1 || skip "the npm registry is unreachable"
    echo "FAIL: npm install kubernetes-models@$version" >&2; exit 1
  fi
fi

"$evalbox" k8s "$src/fixtures/examples/suite.yaml" --shards 3 --parallel 2 \
  --image registry.example/evalbox:0.1.0 --results-claim results --out "$work" >/dev/null
"$evalbox" k8s "$src/fixtures/examples/suite.yaml" --shards 5 --merge-after ok \
  --image evalbox:0.1.0 --out "$work/ok" >/dev/null
for f in "$work"/*.yaml "$work"/ok/*.yaml; do
  python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), open(sys.argv[2], "w"))' \
    "$f" "${f%.yaml}.json"
done
# A broken copy: a completionMode Kubernetes does not have, and an integer as a string.
python3 - "$work/evalbox-examples.json" "$work/broken.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["spec"]["completionMode"] = "Sometimes"
j["spec"]["completions"] = "3"
json.dump(j, open(sys.argv[2], "w"))
PY

cat >"$work/validate.js" <<'JS'
const { Job } = require(process.env.CACHE + "/node_modules/kubernetes-models/batch/v1/Job");
const fs = require("fs");
const [shards, merge, okShards, okMerge, broken] = process.argv.slice(2).map(
  (f) => JSON.parse(fs.readFileSync(f, "utf8")));
const problems = [];
const check = (what, cond) => { if (!cond) problems.push(what); };
for (const [name, m] of [["shards", shards], ["merge", merge], ["ok shards", okShards],
                         ["ok merge", okMerge]]) {
  try { new Job(m).validate(); } catch (e) { problems.push(`${name}: ${e.message}`); }
  check(`${name}: apiVersion`, m.apiVersion === "batch/v1" && m.kind === "Job");
}
const s = shards.spec, pod = s.template.spec, c = pod.containers[0];
check("completionMode Indexed", s.completionMode === "Indexed");
check("completions = shards", s.completions === 3 && okShards.spec.completions === 5);
check("parallelism", s.parallelism === 2 && okShards.spec.parallelism === 5);
check("backoffLimitPerIndex", Number.isInteger(s.backoffLimitPerIndex));
check("restartPolicy Never", pod.restartPolicy === "Never");
check("hostUsers false", pod.hostUsers === false);
check("seccomp Unconfined", pod.securityContext.seccompProfile.type === "Unconfined");
check("AppArmor Unconfined", pod.securityContext.appArmorProfile.type === "Unconfined");
check("procMount Unmasked", c.securityContext.procMount === "Unmasked");
check("not privileged", !("privileged" in c.securityContext));
check("runs the shard", /--shard auto\/3/.test(c.command[2]) && /evalbox doctor/.test(c.command[2]));
check("results claim", pod.volumes.some((v) => v.persistentVolumeClaim &&
                                              v.persistentVolumeClaim.claimName === "results"));
check("merge --partial", /--partial/.test(merge.spec.template.spec.containers[0].command[2]));
check("merge-after ok: no --partial",
      !/--partial/.test(okMerge.spec.template.spec.containers[0].command[2]));
let rejected = false;
try { new Job(broken).validate(); } catch (e) { rejected = /completion/.test(e.message); }
check("a broken manifest is rejected", rejected);
if (problems.length) { console.error(problems.join("\n")); process.exit(1); }
console.log(`k8s manifests: valid batch/v1 Jobs (kubernetes-models ${
  require(process.env.CACHE + "/node_modules/kubernetes-models/package.json").version})`);
JS
CACHE=$cache node "$work/validate.js" "$work/evalbox-examples.json" \
  "$work/evalbox-examples-merge.json" "$work/ok/evalbox-examples.json" \
  "$work/ok/evalbox-examples-merge.json" "$work/broken.json"
