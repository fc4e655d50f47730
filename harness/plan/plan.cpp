// The run matrix and run ids.
#include "harness/plan/plan.h"

#include <algorithm>

#include "base/digest.h"

namespace evalbox::harness {
inline namespace plan {

result<json> extension_digests(const candidate_spec& c) {
  const std::string ctx = fmt::format("candidate {}", c.id);
  json out = json::object();
  if (!c.skills.empty()) {
    json skills = json::object();
    for (const auto& s : c.skills) skills[s.name] = EB_TRY_CTX(tree_digest(s.dir), ctx);
    out["skills"] = skills;
  }
  if (!c.mcp_servers.empty()) {
    json servers = json::object();
    for (const auto& m : c.mcp_servers) {
      json files = json::object();
      for (const auto& [index, file] : m.files)
        files[m.sandbox_file(index).string()] = EB_TRY_CTX(tree_digest(file), ctx);
      servers[m.name] = files;
    }
    out["mcp_servers"] = servers;
  }
  if (!c.hooks.empty()) {
    json hooks = json::array();
    for (size_t i = 0; i < c.hooks.size(); ++i)
      hooks.push_back({{"event", c.hooks[i].event},
                       {"path", c.sandbox_hook(i).string()},
                       {"sha256", EB_TRY_CTX(tree_digest(c.hooks[i].script), ctx)}});
    out["hooks"] = hooks;
  }
  return out;
}

result<std::string> candidate_digest(const candidate_spec& c) {
  json j = c.to_json();
  json files = json::object();
  for (const auto& [target, source] : c.home_files)
    files[target] = EB_TRY_CTX(sha256_file(source), fmt::format("candidate {}", c.id));
  j["home_file_digests"] = files;
  // What skills, MCP servers and hooks name, by content (only when there are any: other
  // candidates' digests stay what they were).
  if (json ext = EB_TRY(extension_digests(c)); !ext.empty()) j["extension_digests"] = ext;
  return sha256_hex(canonical_json(j));
}

bool glob_match(std::string_view p, std::string_view t) {
  size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == t[ti])) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

namespace {

// The suite's mounts, bundles and caches a fixture's runs get (its own are in its task digest:
// the YAML and, inside its directory, the sources): each mount's source by the digest of its
// content, each bundle by its digest, each cache by how it is filled. Empty without any.
std::string suite_inputs_key(const fixture_spec& fixture) {
  std::string key;
  for (const auto& m : fixture.mounts)
    if (m.from_suite)
      key += fmt::format("\nmount {} {} {} {}", m.target, to_string(m.access),
                         m.max_bytes.value_or(0), m.source_digest);
  for (const auto& b : fixture.bundles)
    if (b.from_suite) key += fmt::format("\nbundle {} {}", b.target, b.digest);
  for (const auto& c : fixture.caches)
    if (c.from_suite) key += fmt::format("\ncache {}", c.to_json().dump());
  return key;
}

std::string suite_environment_only(const fixture_spec& fixture) {
  // A Harbor task's image comes from outside its directory (the suite's images:, --image, a
  // podman store: `image` names which, with the image id or build digest where evalbox knows
  // it): part of its runs' identity. The reward it must reach is its grading's
  // (grading_digest).
  if (fixture.harbor && fixture.environment)
    return fmt::format("harbor\n{}", fixture.environment->image);
  // A registry image is named by the digest its tag resolved to (pinned before planning), not
  // by the tag: a tag that moves makes new runs instead of resuming into the old ones.
  if (fixture.environment && fixture.environment->image_ref.starts_with("docker://"))
    return fmt::format("registry\n{}\n{}", fixture.environment->image_ref,
                       fixture.environment->workdir.value_or(""));
  if (!fixture.environment || !fixture.environment_from_suite) return {};
  return fmt::format("{}\n{}", fixture.environment->image,
                     fixture.environment->workdir.value_or(""));
}

}  // namespace

std::string suite_environment_key(const fixture_spec& fixture) {
  return suite_environment_only(fixture) + suite_inputs_key(fixture);
}

std::string grading_digest(const fixture_spec& fixture, const suite_spec& suite) {
  json judges = json::object();
  for (const auto& c : fixture.checks) {
    if (c.kind != check_kind::judge) continue;
    auto it = suite.judges.find(c.judge.judge);
    if (it == suite.judges.end()) continue;  // validation refuses it before any run
    json j = it->second.to_json();
    j["max_evidence_bytes"] = it->second.max_evidence_bytes;
    j["max_output_tokens"] = it->second.max_output_tokens;
    if (!it->second.argv.empty())
      if (auto d = sha256_file(it->second.argv.front())) j["program_digest"] = *d;
    judges[it->first] = std::move(j);
  }
  const json identity = {{"schema", "evalbox.grading.v1"},
                         {"checks", fixture.grading_text},
                         {"grader", fixture.grader_digest},
                         {"threshold", fixture.threshold},
                         {"judges", std::move(judges)}};
  return sha256_hex(canonical_json(identity));
}

std::string run_id_of(std::string_view fixture_digest, std::string_view candidate_digest, int trial,
                      std::string_view suite_environment) {
  std::string key =
      fmt::format("evalbox.run.v1\n{}\n{}\n{}", fixture_digest, candidate_digest, trial);
  if (!suite_environment.empty()) key += fmt::format("\nenvironment {}", suite_environment);
  return sha256_hex(key).substr(0, 16);
}

int shard_of(size_t f, size_t c, int t, size_t fixtures, int trials, int shards) {
  if (shards <= 1) return 0;
  const auto n = static_cast<size_t>(shards);
  const auto per_fixture = static_cast<size_t>(std::max(trials, 1));
  const size_t unit = f * per_fixture + static_cast<size_t>(t);
  const size_t units = fixtures * per_fixture;
  if (units >= n) return static_cast<int>(unit % n);
  // Fewer units than shards: the runs dealt candidate by candidate. A candidate's runs (fewer
  // than N) land on different shards, and the runs a shard gets are N apart, so each is of
  // another candidate.
  return static_cast<int>((c * units + unit) % n);
}

result<std::vector<run_spec>> plan_runs(const suite_spec& suite, const plan_options& options) {
  if (options.shard_count < 1 || options.shard_index < 0 ||
      options.shard_index >= options.shard_count)
    return make_error(error_kind::invalid_argument,
                      "shard {}/{} is not valid (K/N with 0 <= K < N)", options.shard_index,
                      options.shard_count);
  int trials = options.trials > 0 ? options.trials : suite.trials;
  std::vector<std::string> cand_digests;
  for (const auto& c : suite.candidates) cand_digests.push_back(EB_TRY(candidate_digest(c)));
  std::vector<run_spec> runs;
  for (size_t f = 0; f < suite.fixtures.size(); ++f) {
    for (size_t c = 0; c < suite.candidates.size(); ++c) {
      std::string name = suite.fixtures[f].id + "/" + suite.candidates[c].id;
      bool selected = options.filter.empty() || glob_match(options.filter, name);
      for (int t = 0; t < trials; ++t) {
        if (!selected) continue;
        if (shard_of(f, c, t, suite.fixtures.size(), trials, options.shard_count) !=
            options.shard_index)
          continue;
        runs.push_back({f, c, t,
                        run_id_of(suite.fixtures[f].task_identity(), cand_digests[c], t,
                                  suite_environment_key(suite.fixtures[f])),
                        cand_digests[c]});
      }
    }
  }
  return runs;
}

}  // namespace plan
}  // namespace evalbox::harness
