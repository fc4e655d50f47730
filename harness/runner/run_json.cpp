// run.json (see run_json.h): the record of one run, and the names of its states.
#include "harness/runner/run_json.h"

#include <time.h>

#include <chrono>

#include "base/log.h"
#include "harness/results/results.h"

namespace evalbox::harness {
inline namespace runner {

std::string_view to_string(run_error_kind kind) noexcept {
  switch (kind) {
    case run_error_kind::setup:
      return "setup";
    case run_error_kind::sandbox:
      return "sandbox";
    case run_error_kind::host:
      return "host";
    case run_error_kind::agent:
      return "agent";
    case run_error_kind::adapter:
      return "adapter";
  }
  return "host";
}

std::string_view to_string(run_verdict verdict) noexcept {
  switch (verdict) {
    case run_verdict::passed:
      return "passed";
    case run_verdict::failed:
      return "failed";
    case run_verdict::not_assessed:
      return "not_assessed";
  }
  return "not_assessed";
}

bool attempt_state::infrastructure() const {
  return error_kind && *error_kind != run_error_kind::agent &&
         *error_kind != run_error_kind::adapter;
}

attempt_state& attempt_state::fail(run_error_kind kind, std::string_view message) {
  error_kind = kind;
  error = log::scrub(message);
  return *this;
}

json usage_json(const usage& u, const candidate_spec& candidate, const std::string& model,
                const suite_spec& suite) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json j;
  j["input_tokens"] = opt(u.input_tokens);
  j["output_tokens"] = opt(u.output_tokens);
  j["cached_input_tokens"] = opt(u.cached_input_tokens);
  j["reasoning_tokens"] = opt(u.reasoning_tokens);
  j["cost_usd"] = opt(u.cost_usd);
  j["cost_source"] = u.cost_usd ? json("client") : json(nullptr);
  if (!u.cost_usd && u.input_tokens && u.output_tokens) {
    if (const price_spec* price = suite.price_for(candidate, model)) {
      j["cost_usd"] =
          price->cost(*u.input_tokens, u.cached_input_tokens.value_or(0), 0, *u.output_tokens);
      j["cost_source"] = "price_table";
    }
  }
  return j;
}

namespace {

// The record's grading: the attempt's, or "skipped" when it was not graded; with its digest.
json grading_json(const suite_spec& suite, const fixture_spec& f, const attempt_state& st) {
  json g = st.grading.is_null() ? json{{"status", "skipped"},
                                       {"checks", json::array()},
                                       {"score", nullptr},
                                       {"threshold", f.threshold},
                                       {"error", nullptr}}
                                : st.grading;
  g["digest"] = grading_digest(f, suite);
  return g;
}

}  // namespace

json to_run_json(const suite_spec& suite, const run_spec& r, const attempt_state& st,
                 const run_timing& timing) {
  const auto& f = suite.fixtures[r.fixture];
  const auto& c = suite.candidates[r.candidate];
  json j;
  j["schema"] = run_schema;
  j["run_id"] = r.run_id;
  j["suite"] = suite.name;
  j["fixture"] = {{"id", f.id}, {"digest", f.digest}, {"task_digest", f.task_digest}};
  j["candidate"] = {{"id", c.id}, {"adapter", c.adapter}, {"digest", r.candidate_digest}};
  // What its skills, MCP servers and hooks held (part of its digest), when it has any.
  if (auto ext = extension_digests(c); ext && !ext->empty()) j["candidate"]["extensions"] = *ext;
  j["trial"] = r.trial;
  j["environment"] = st.environment;
  // What the run saw besides its workspace: each mount's source by its content's digest, each
  // bundle by the digest it was verified against. Left out when there are none.
  if (!f.mounts.empty()) {
    json mounts = json::array();
    for (const auto& m : f.mounts) mounts.push_back(m.to_json());
    j["mounts"] = std::move(mounts);
  }
  if (!f.bundles.empty()) {
    json bundles = json::array();
    for (const auto& b : f.bundles) bundles.push_back(b.to_json());
    j["bundles"] = std::move(bundles);
  }
  // Each cache by the key of what filled it and the digest of what it held.
  if (!st.caches.is_null()) j["caches"] = st.caches;
  j["attempts"] = timing.attempts;
  json exec = {{"status", st.failed() ? "error" : "completed"}, {"records", st.records}};
  exec["error"] = st.error.empty() ? json(nullptr) : json(st.error);
  exec["error_kind"] = st.error_kind ? json(to_string(*st.error_kind)) : json(nullptr);
  exec["session"] = st.session_id.empty() ? json(nullptr) : json(st.session_id);
  // The agent's own launch says how the agent's process ended (not the follow-up's).
  exec["outcome"] = nullptr;
  exec["exit_code"] = nullptr;
  if (auto agent = st.records.find("agent"); agent != st.records.end() && agent->is_object()) {
    exec["outcome"] = agent->value("outcome", json(nullptr));
    exec["exit_code"] = agent->value("exit_code", json(nullptr));
  }
  if (st.budget_exhausted) {
    exec["outcome"] = "budget_exhausted";
    exec["budget_exhausted"] = *st.budget_exhausted;
  }
  j["execution"] = exec;
  j["grading"] = grading_json(suite, f, st);
  j["verdict"] = to_string(st.verdict);
  j["usage"] = st.usage.is_null() ? usage_json({}, c, "", suite) : st.usage;
  // The judge's tokens and cost, never added to the candidate's (docs/results.md).
  j["judge_usage"] = st.judge_usage;
  json timings = st.timings;
  timings["started_at"] = timing.started_at;
  timings["finished_at"] = timing.finished_at;
  timings["wall_ms"] = timing.wall_ms;
  j["timings"] = timings;
  if (!st.kept_workspace.is_null()) j["kept_workspace"] = st.kept_workspace;
  j["final_state"] = st.final_state;
  j["gateway"] = st.gateway;
  return j;
}

json regraded_run_json(const suite_spec& suite, const run_spec& r, const json& old,
                       const attempt_state& st) {
  const auto& f = suite.fixtures[r.fixture];
  json j = old;
  json previous = nullptr;
  if (auto g = old.find("grading"); g != old.end() && g->is_object())
    previous = g->value("digest", json(nullptr));
  j["fixture"]["digest"] = f.digest;
  j["grading"] = grading_json(suite, f, st);
  const std::string digest = j["grading"]["digest"];
  j["verdict"] = to_string(st.verdict);
  j["judge_usage"] = st.judge_usage;
  json regraded = {{"at", now_rfc3339()},
                   {"previous_digest", previous},
                   {"files", fmt::format("runs/{}/gradings/{}", r.run_id, digest)},
                   {"grading_ms", st.timings.value("grading_ms", json(nullptr))}};
  if (!st.records.empty()) regraded["records"] = st.records;
  j["regraded"] = std::move(regraded);
  return j;
}

std::string now_rfc3339() {
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace runner
}  // namespace evalbox::harness
