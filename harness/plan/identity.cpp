// plan.json: a plan's identity (see identity.h).
#include "harness/plan/identity.h"

#include <algorithm>
#include <system_error>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json_get.h"

namespace evalbox::harness {
inline namespace plan {

namespace fs = std::filesystem;

namespace {

json matrix_json(const plan_identity& p) {
  json fixtures = json::array();
  for (const auto& f : p.fixtures) {
    json j = {{"id", f.id}, {"digest", f.digest}};
    if (!f.environment.empty()) j["environment"] = f.environment;
    fixtures.push_back(std::move(j));
  }
  json candidates = json::array();
  for (const auto& c : p.candidates)
    candidates.push_back({{"id", c.id}, {"adapter", c.adapter}, {"digest", c.digest}});
  return {{"suite", {{"name", p.suite}, {"digest", p.suite_digest}}},
          {"fixtures", std::move(fixtures)},
          {"candidates", std::move(candidates)},
          {"trials", p.trials},
          {"filter", p.filter.empty() ? json(nullptr) : json(p.filter)},
          {"baseline", p.baseline ? json(*p.baseline) : json(nullptr)}};
}

// The checks of plan_from_json: each names the file and the field.
struct reader {
  std::string_view where;

  template <class... Args>
  std::unexpected<error> bad(fmt::format_string<Args...> f, Args&&... args) const {
    return make_error(error_kind::invalid_argument, "{}: {} (is it an evalbox.plan.v1 file?)",
                      where, fmt::format(f, std::forward<Args>(args)...));
  }
  result<std::string> string(const json& j, const char* key, bool digest = false) const {
    auto s = json_find<std::string>(j, key);
    if (!s) return bad("`{}` must be a string", key);
    if (digest && !is_sha256_hex(*s))
      return bad("`{}` must be a SHA-256 digest (64 hex digits)", key);
    return std::move(*s);
  }
  result<int> integer(const json& j, const char* key, int min) const {
    auto n = json_find<int>(j, key);
    if (!n || *n < min || *n > 1'000'000'000)
      return bad("`{}` must be an integer of at least {}", key, min);
    return *n;
  }
};

}  // namespace

std::string plan_identity::matrix_digest() const {
  return sha256_hex(canonical_json(matrix_json(*this)));
}

result<plan_identity> identify_plan(const suite_spec& suite, const plan_options& options) {
  plan_identity p;
  p.suite = suite.name;
  p.suite_digest = EB_TRY_CTX(sha256_file(suite.file), "suite digest");
  p.suite_file = suite.file.string();
  for (const auto& f : suite.fixtures)
    p.fixtures.push_back({f.id, f.task_identity(), suite_environment_key(f)});
  for (const auto& c : suite.candidates)
    p.candidates.push_back({c.id, c.adapter, EB_TRY(candidate_digest(c))});
  p.trials = options.trials > 0 ? options.trials : suite.trials;
  p.filter = options.filter;
  p.baseline = suite.baseline;
  p.shard_index = options.shard_index;
  p.shard_count = options.shard_count;
  return p;
}

json to_json(const plan_identity& p) {
  json j = matrix_json(p);
  j["schema"] = plan_schema;
  j["matrix_digest"] = p.matrix_digest();
  // A merged directory holds several shards: no one index.
  j["shard"] = {{"index", p.merged.empty() ? json(p.shard_index) : json(nullptr)},
                {"count", p.shard_count}};
  j["merged"] = p.merged.empty() ? json(nullptr) : json(p.merged);
  if (!p.suite_file.empty()) j["suite_file"] = p.suite_file;
  return j;
}

result<plan_identity> plan_from_json(const json& j, std::string_view where) {
  reader r{where};
  if (!j.is_object()) return r.bad("not a JSON object");
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || *schema != plan_schema)
    return r.bad("`schema` is not \"{}\"", plan_schema);
  plan_identity p;
  auto suite = j.find("suite");
  if (suite == j.end() || !suite->is_object()) return r.bad("`suite` must be an object");
  p.suite = EB_TRY(r.string(*suite, "name"));
  p.suite_digest = EB_TRY(r.string(*suite, "digest", true));
  if (auto f = j.find("suite_file"); f != j.end() && f->is_string()) p.suite_file = *f;
  auto fixtures = j.find("fixtures");
  if (fixtures == j.end() || !fixtures->is_array()) return r.bad("`fixtures` must be a list");
  for (const auto& f : *fixtures) {
    if (!f.is_object()) return r.bad("a fixture must be an object");
    plan_identity::fixture_ref ref{EB_TRY(r.string(f, "id")), EB_TRY(r.string(f, "digest", true))};
    if (f.contains("environment")) ref.environment = EB_TRY(r.string(f, "environment"));
    p.fixtures.push_back(std::move(ref));
  }
  auto candidates = j.find("candidates");
  if (candidates == j.end() || !candidates->is_array()) return r.bad("`candidates` must be a list");
  for (const auto& c : *candidates) {
    if (!c.is_object()) return r.bad("a candidate must be an object");
    p.candidates.push_back({EB_TRY(r.string(c, "id")), EB_TRY(r.string(c, "adapter")),
                            EB_TRY(r.string(c, "digest", true))});
  }
  p.trials = EB_TRY(r.integer(j, "trials", 1));
  if (auto f = j.find("filter"); f != j.end() && !f->is_null())
    p.filter = EB_TRY(r.string(j, "filter"));
  if (auto b = j.find("baseline"); b != j.end() && !b->is_null())
    p.baseline = EB_TRY(r.string(j, "baseline"));
  auto shard = j.find("shard");
  if (shard == j.end() || !shard->is_object()) return r.bad("`shard` must be an object");
  p.shard_count = EB_TRY(r.integer(*shard, "count", 1));
  auto merged = j.find("merged");
  const bool is_merge = merged != j.end() && !merged->is_null();
  if (auto k = shard->find("index"); !is_merge || k == shard->end() || !k->is_null()) {
    p.shard_index = EB_TRY(r.integer(*shard, "index", 0));
    if (p.shard_index >= p.shard_count)
      return r.bad("shard {}/{}: K must be below N", p.shard_index, p.shard_count);
  }
  if (is_merge) {
    const json* m = &*merged;
    if (!m->is_array()) return r.bad("`merged` must be a list of shard indices");
    for (const auto& k : *m) {
      if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() >= p.shard_count)
        return r.bad("`merged` holds {}, not a shard index below {}", k.dump(), p.shard_count);
      p.merged.push_back(k.get<int>());
    }
    if (p.merged.empty()) return r.bad("`merged` is an empty list (write null)");
    std::sort(p.merged.begin(), p.merged.end());
    p.merged.erase(std::unique(p.merged.begin(), p.merged.end()), p.merged.end());
  }
  // A digest that does not match the content is a file edited by hand, or another version's.
  if (auto d = j.find("matrix_digest"); d == j.end() || !d->is_string() || *d != p.matrix_digest())
    return r.bad("`matrix_digest` does not match the plan it describes (edited by hand?)");
  return p;
}

result<plan_identity> read_plan(const fs::path& results_dir) {
  const fs::path file = results_dir / plan_file_name;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec)))
    return make_error(error_kind::not_found,
                      "{}: no {} (a results directory written by `evalbox run` has one)",
                      results_dir.string(), plan_file_name);
  auto text = EB_TRY(read_file(file, 64u << 20));
  auto j = EB_TRY(parse_json(text, file.string()));
  return plan_from_json(j, file.string());
}

status write_plan(const fs::path& results_dir, const plan_identity& plan) {
  return write_file_atomic(results_dir / plan_file_name, pretty_json(to_json(plan)));
}

result<std::optional<plan_identity>> adopt_plan(const fs::path& results_dir,
                                                const plan_identity& plan) {
  std::optional<plan_identity> other;
  auto before = read_plan(results_dir);
  if (before) {
    if (!before->merged.empty())
      return make_error(error_kind::invalid_argument,
                        "{} holds merged results (evalbox merge wrote it): run into another "
                        "directory, then merge that one into it",
                        results_dir.string());
    if (before->matrix_digest() == plan.matrix_digest() &&
        (before->shard_index != plan.shard_index || before->shard_count != plan.shard_count))
      return make_error(error_kind::invalid_argument,
                        "{} holds shard {}/{} of this plan, not {}/{}: every shard writes a "
                        "directory of its own (RESULTS/shards/K)",
                        results_dir.string(), before->shard_index, before->shard_count,
                        plan.shard_index, plan.shard_count);
    if (before->matrix_digest() != plan.matrix_digest()) other = std::move(*before);
  } else if (before.error().kind != error_kind::not_found) {
    return std::unexpected(std::move(before).error());
  }
  EB_TRY(make_dirs(results_dir));
  EB_TRY(write_plan(results_dir, plan));
  return other;
}

std::vector<matrix_run> matrix_runs(const plan_identity& p) {
  std::vector<matrix_run> runs;
  for (size_t f = 0; f < p.fixtures.size(); ++f) {
    for (size_t c = 0; c < p.candidates.size(); ++c) {
      bool selected =
          p.filter.empty() || glob_match(p.filter, p.fixtures[f].id + "/" + p.candidates[c].id);
      for (int t = 0; t < p.trials; ++t) {
        if (!selected) continue;
        runs.push_back(
            {run_id_of(p.fixtures[f].digest, p.candidates[c].digest, t, p.fixtures[f].environment),
             static_cast<uint32_t>(f), static_cast<uint32_t>(c), t,
             shard_of(f, c, t, p.fixtures.size(), p.trials, p.shard_count)});
      }
    }
  }
  return runs;
}

std::vector<std::string> planned_ids(const plan_identity& plan) {
  std::vector<std::string> ids;
  for (auto& r : matrix_runs(plan))
    if (!plan.merged.empty() || r.shard == plan.shard_index) ids.push_back(std::move(r.run_id));
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace plan
}  // namespace evalbox::harness
