// The runner (see runner.h): N workers take runs from the scheduler (scheduler.h), take each
// through its attempts (execute.h), record it as run.json (run_json.h), tear it down, count it.
#include "harness/runner/runner.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json_get.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/results/results.h"
#include "harness/runner/caches.h"
#include "harness/runner/execute.h"
#include "harness/runner/run_json.h"
#include "harness/runner/scheduler.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::harness {
inline namespace runner {

namespace fs = std::filesystem;

using clock_type = std::chrono::steady_clock;

std::map<std::string, std::string> base_environment() {
  return {{"PATH", "/evalbox/bin:/usr/local/bin:/usr/bin:/bin"},
          {"HOME", sandbox::sandbox_home},
          {"TMPDIR", "/tmp"},
          {"LANG", "C.UTF-8"},
          {"TERM", "dumb"},
          {"USER", "root"},
          {"LOGNAME", "root"}};
}

namespace {

// What a suite_budget counts: the spending of runs, summed.
struct spending {
  double cost_usd = 0;
  uint64_t input = 0, output = 0, requests = 0;

  // A record's (or an attempt's) usage, and its gateway's calls.
  void add_spending(const spending& o) {
    cost_usd += o.cost_usd;
    input += o.input;
    output += o.output;
    requests += o.requests;
  }
  void add(const json& usage, const json& gateway) {
    if (usage.is_object()) {
      cost_usd += json_find<double>(usage, "cost_usd").value_or(0);
      input += json_find<uint64_t>(usage, "input_tokens").value_or(0);
      output += json_find<uint64_t>(usage, "output_tokens").value_or(0);
    }
    if (gateway.is_object())
      if (auto t = gateway.find("totals"); t != gateway.end() && t->is_object())
        requests += json_find<uint64_t>(*t, "calls").value_or(0);
  }
  [[nodiscard]] std::optional<std::string> reached(const budget_spec& b) const {
    return b.reached(cost_usd, input, output, requests);
  }
};

// What resume needs of a recorded run (its newest record).
struct recorded_run {
  bool completed = false;  // its execution completed (so it was graded, or could be)
  std::string grading_digest;
  bool state_kept = false;  // final_state.path is set
  spending spent;           // its usage, for a suite_budget
};

result<std::map<std::string, recorded_run>> recorded_runs(const results_dir& results) {
  static const record_fields fields{
      "run_id",         "execution.status",   "grading.digest",      "final_state.path",
      "usage.cost_usd", "usage.input_tokens", "usage.output_tokens", "gateway.totals.calls"};
  std::map<std::string, recorded_run> out;
  EB_TRY(results.for_each_record(fields, [&](const json& r, record_location) -> status {
    const std::string id = json_value_or(r, "run_id", "");
    if (id.empty()) return {};
    recorded_run& rec = out[id];
    const json& exec = r.value("execution", json::object());
    rec.completed = exec.is_object() && json_value_or(exec, "status", "") == "completed";
    const json& g = r.value("grading", json::object());
    rec.grading_digest = g.is_object() ? json_value_or(g, "digest", "") : "";
    const json& fs = r.value("final_state", json::object());
    rec.state_kept = fs.is_object() && fs.contains("path") && fs.at("path").is_string();
    rec.spent = {};
    rec.spent.add(r.value("usage", json()), r.value("gateway", json()));
    return {};
  }));
  return out;
}

// The scheduler's view of an attempt.
attempt_report scheduling_view(const attempt_state& st) {
  if (st.cancelled) return {attempt_end::cancelled, {}};
  if (st.lease_busy) return {attempt_end::lease_held_elsewhere, {}};
  if (st.infrastructure() && st.retryable)
    return {attempt_end::infrastructure_error,
            fmt::format("{}: {}", to_string(*st.error_kind), st.error)};
  return {attempt_end::done, {}};
}

void warn_reclaim(sandbox::preparer& prep) {
  if (auto rec = prep.reclaim_stale(); !rec) {
    log::warn("reclaim: {}", rec.error().message);
  } else {
    for (const auto& e : rec->errors) log::warn("reclaim: {}", e);
  }
}

// True when the filesystem of the results directory has no free block left (for root, which
// may use the blocks reserved for it, none at all).
bool results_full(const std::filesystem::path& root) {
  struct statvfs sv {};
  if (::statvfs(root.c_str(), &sv) != 0 || sv.f_blocks == 0) return false;
  return (::geteuid() == 0 ? sv.f_bfree : sv.f_bavail) == 0;
}

// The runs a worker takes from the scheduler, each through its attempts, recorded, torn down
// and counted. One per worker thread; shared state is the scheduler's and the tally's.
class suite_execution {
 public:
  suite_execution(const suite_spec& suite, const std::vector<run_spec>& queued,
                  const runner_options& options, const execution_context& x,
                  const results_dir& results, scheduler& sched, run_totals& totals)
      : suite_(suite),
        queued_(queued),
        options_(options),
        x_(x),
        results_(results),
        sched_(sched),
        totals_(totals) {
    prog_.total = static_cast<int>(queued.size());
  }

  // Until the scheduler has nothing left. The ticket holds the run's leases until run_one has
  // torn the run's sandbox down.
  void worker() {
    while (auto ticket = sched_.next()) {
      {
        std::lock_guard lock(mu_);
        ++started_runs_;
      }
      run_one(queued_[ticket->run()], ticket->credential_wait());
    }
  }

  [[nodiscard]] const std::optional<error>& fatal() const { return fatal_; }
  [[nodiscard]] int started_runs() const { return started_runs_; }
  [[nodiscard]] const std::optional<std::string>& budget_spent() const { return budget_spent_; }

  // The suite_budget, with what the results already recorded spent: once reached, no run is
  // started (those running finish).
  void count_suite_budget(spending already) {
    spent_ = already;
    if (suite_.suite_budget) budget_spent_ = spent_.reached(*suite_.suite_budget);
    if (budget_spent_) sched_.stop();
  }

 private:
  bool stopping() const { return options_.cancel && options_.cancel->requested.load(); }

  // attempts → record → teardown → tally, for one run. `credential_wait`: how long the
  // scheduler kept it waiting for a lease.
  void run_one(const run_spec& r, std::chrono::milliseconds credential_wait) {
    auto t0 = clock_type::now();
    const std::string started_at = now_rfc3339();
    attempt_state st;
    std::optional<sandbox::prepared_session> session;
    auto teardown = [&] {
      if (!session) return;
      if (auto s = session->close(); !s)
        log::warn("run {}: teardown: {}", r.run_id, s.error().message);
      session.reset();
    };
    const int last = sched_.attempts(
        r.run_id,
        [&](int attempt) {
          teardown();
          st = r.regrade          ? regrade_attempt(x_, r, session)
               : options_.attempt ? options_.attempt(x_, r, attempt, session)
                                  : execute_attempt(x_, r, attempt, session);
          return scheduling_view(st);
        },
        &credential_wait);
    // A run that leases credentials says how long it waited for them (docs/results.md).
    if (!r.regrade && !suite_.candidates[r.candidate].credentials.empty())
      st.timings["credential_wait_ms"] = credential_wait.count();
    if (r.regrade && st.failed() && !st.cancelled) {
      // Kept as it was: the old grading stays the run's newest.
      log::warn("run {}: not graded again: {}", r.run_id, st.error);
      teardown();
      std::lock_guard lock(mu_);
      ++totals_.regrade_errors;
      return;
    }
    bool recorded = false;
    if (!st.cancelled && !stopping()) {
      json j = r.regrade ? regraded_record(r, st)
                         : to_run_json(suite_, r, st,
                                       {last + 1, started_at, now_rfc3339(), ms_since(t0)});
      if (j.is_null()) {  // a regrade of a run whose run.json is gone or unreadable
        log::warn("run {}: not graded again: its runs/{}/run.json cannot be read", r.run_id,
                  r.run_id);
        teardown();
        std::lock_guard lock(mu_);
        ++totals_.regrade_errors;
        return;
      }
      // A full results directory may have cut the run's own files short (its output, its
      // transcript): such a run is not recorded, and nothing after it either. Nothing partial
      // is left in results.jsonl (results.h), so a later run resumes from what was recorded.
      status s =
          results_full(results_.root())
              ? status(std::unexpected(error{error_kind::io, "No space left on device", ENOSPC}))
              : results_.record(j);
      if (!s) {
        error e = std::move(s).error().with_context(
            fmt::format("record run {} in {}", r.run_id, results_.root().string()));
        if (e.sys_errno == ENOSPC || e.sys_errno == EDQUOT)
          e.message +=
              "; the results directory is full: free space there and run again "
              "(runs already recorded are kept and skipped)";
        std::lock_guard lock(mu_);
        if (!fatal_) fatal_ = std::move(e);
        sched_.stop();
      } else {
        recorded = true;
      }
    }
    teardown();  // only now: the result is on disk before the sandbox goes away
    if (recorded) tally(r, st);
    if (recorded && !r.regrade && suite_.suite_budget) {
      std::lock_guard lock(mu_);
      spent_.add(st.usage, st.gateway);
      if (!budget_spent_) {
        budget_spent_ = spent_.reached(*suite_.suite_budget);
        if (budget_spent_) sched_.stop();
      }
    }
  }

  // The run's new record after a regrade; the record it replaces as the newest is kept as
  // runs/<id>/gradings/<its digest>.json (and stays in results.jsonl).
  json regraded_record(const run_spec& r, const attempt_state& st) {
    const fs::path dir = results_.run_dir(r.run_id);
    json old = json::object();
    if (auto text = read_file(dir / "run.json"))
      if (auto j = parse_json(*text, "run.json"); j && j->is_object()) old = std::move(*j);
    std::string previous = "original";
    if (auto g = old.find("grading"); g != old.end() && g->is_object())
      previous = json_value_or(*g, "digest", std::string("original"));
    const fs::path keep = dir / "gradings" / (previous + ".json");
    std::error_code ec;
    if (!old.empty() && !fs::exists(keep, ec)) (void)write_file_atomic(keep, pretty_json(old));
    if (old.empty()) return json();
    json j = regraded_run_json(suite_, r, old, st);
    if (old.value("verdict", json()) != j["verdict"]) {
      std::lock_guard lock(mu_);
      ++totals_.verdicts_changed;
    }
    return j;
  }

  void tally(const run_spec& r, const attempt_state& st) {
    std::lock_guard lock(mu_);
    ++prog_.done;
    if (r.regrade) ++totals_.regraded;
    if (st.failed())
      ++totals_.execution_errors, ++prog_.errors;
    else if (st.verdict == run_verdict::not_assessed)
      ++totals_.grader_errors, ++prog_.errors;
    else if (st.verdict == run_verdict::passed)
      ++totals_.passed, ++prog_.passed;
    else
      ++totals_.failed, ++prog_.failed;
    prog_.elapsed_s = std::chrono::duration<double>(clock_type::now() - started_).count();
    prog_.last = fmt::format("{}/{}#{}: {}", suite_.fixtures[r.fixture].id,
                             suite_.candidates[r.candidate].id, r.trial,
                             st.failed() ? fmt::format("error ({})", to_string(*st.error_kind))
                                         : std::string(to_string(st.verdict)));
    if (r.regrade) prog_.last += " (graded again)";
    if (options_.on_progress) options_.on_progress(prog_);
  }

  const suite_spec& suite_;
  const std::vector<run_spec>& queued_;
  const runner_options& options_;
  const execution_context& x_;
  const results_dir& results_;
  scheduler& sched_;
  run_totals& totals_;

  std::mutex mu_;
  int started_runs_ = 0;
  spending spent_;
  std::optional<std::string> budget_spent_;
  progress prog_;
  const clock_type::time_point started_ = clock_type::now();
  std::optional<error> fatal_;
};

}  // namespace

std::optional<fs::path> host_home() {
  const char* home = std::getenv("HOME");
  if (!home || !*home || std::string_view(home) == "/") return std::nullopt;
  return fs::path(home);
}

std::vector<fs::path> protected_roots_for(const suite_spec& suite, const runner_options& options,
                                          const std::optional<fs::path>& home) {
  std::vector<fs::path> roots = options.protected_roots;
  if (options.protect_host_home && home) roots.push_back(*home);
  const fs::path results = normalize(options.results_dir);
  const fs::path override_dir =
      options.workspace_override.empty() ? fs::path() : normalize(options.workspace_override);
  std::erase_if(roots, [&](const fs::path& r) {
    if (is_within(results, r)) return true;
    if (!override_dir.empty() && is_within(override_dir, r)) return true;
    for (const auto& f : suite.fixtures)
      if (is_within(f.dir, r)) return true;
    return is_within(suite.file, r);
  });
  return roots;
}

namespace {

// Where the runner's notices go: the caller's on_notice, else the log.
std::function<void(const std::string&)> notice_sink(const runner_options& options) {
  return [&options](const std::string& line) {
    if (options.on_notice)
      options.on_notice(line);
    else
      log::info("{}", line);
  };
}

}  // namespace

result<std::vector<std::optional<sandbox::image_summary>>> resolve_fixture_images(
    const suite_spec& suite, const std::vector<bool>& used, sandbox::preparer& prep,
    const std::atomic<bool>* cancel, const std::function<void(const std::string&)>& say) {
  std::vector<std::optional<sandbox::image_summary>> images(suite.fixtures.size());
  std::map<std::string, sandbox::image_summary> by_reference;
  for (size_t i = 0; i < suite.fixtures.size(); ++i) {
    const auto& env = suite.fixtures[i].environment;
    if (!env || i >= used.size() || !used[i]) continue;
    auto it = by_reference.find(env->image_ref);
    if (it == by_reference.end()) {
      auto img = prep.resolve_image(env->image_ref, suite.fixtures[i].dir, cancel, say);
      if (!img)
        return std::unexpected(std::move(img).error().with_context(
            fmt::format("fixture {}: environment.image {} ({})", suite.fixtures[i].id, env->image,
                        env->image_where.to_string())));
      log::info("image {}: {} ({} layer(s){})", img->reference, img->id, img->layers.size(),
                img->layers_unpacked ? fmt::format(", {} unpacked now", img->layers_unpacked) : "");
      it = by_reference.emplace(env->image_ref, std::move(*img)).first;
    }
    images[i] = it->second;
  }
  return images;
}

result<suite_caches> warm_suite(const suite_spec& suite, const runner_options& options,
                                const std::set<std::string>& only, bool force) {
  EB_TRY(check_cache_names(suite, only));
  std::vector<bool> used(suite.fixtures.size());
  for (size_t i = 0; i < suite.fixtures.size(); ++i)
    used[i] =
        std::any_of(suite.fixtures[i].caches.begin(), suite.fixtures[i].caches.end(),
                    [&](const cache_spec& c) { return only.empty() || only.contains(c.name); });
  if (std::none_of(used.begin(), used.end(), [](bool u) { return u; })) return suite_caches{};
  sandbox::preparer prep(options.sandbox);
  const auto say = notice_sink(options);
  const auto images = EB_TRY(resolve_fixture_images(
      suite, used, prep, options.cancel ? &options.cancel->requested : nullptr, say));
  cache_options co{suite.default_limits, protected_roots_for(suite, options, host_home())};
  co.protected_roots.push_back(normalize(fs::absolute(options.results_dir)));
  co.force = force;
  co.only = only;
  co.say = say;
  co.cancel = options.cancel;
  return ensure_caches(suite, images, used, prep, co);
}

result<run_totals> run_suite(const suite_spec& suite, const std::vector<run_spec>& runs,
                             const adapter_registry& adapters, const runner_options& given) {
  runner_options options = given;
  options.protected_roots = protected_roots_for(suite, given, host_home());
  // Absolute from here on: the results root is also a protected root of every session.
  results_dir results(normalize(options.results_dir));
  EB_TRY_CTX(results.create(), "results directory");
  run_totals totals;
  totals.planned = static_cast<int>(runs.size());

  std::map<std::string, recorded_run> done;
  if (options.resume || options.regrade_only || suite.suite_budget)
    done = EB_TRY(recorded_runs(results));
  spending already;  // by every run the results hold (a suite_budget counts them all)
  for (const auto& [id, rec] : done) already.add_spending(rec.spent);
  if (!options.resume && !options.regrade_only) done.clear();
  std::vector<run_spec> queued;
  std::vector<std::string> current(suite.fixtures.size());  // grading digests, when asked
  for (const auto& r : runs) {
    auto it = done.find(r.run_id);
    if (it == done.end()) {
      if (options.regrade_only)
        ++totals.not_run;
      else
        queued.push_back(r);
      continue;
    }
    std::string& digest = current[r.fixture];
    if (digest.empty()) digest = grading_digest(suite.fixtures[r.fixture], suite);
    const recorded_run& rec = it->second;
    if (!rec.completed || (!options.regrade_all && rec.grading_digest == digest)) {
      ++totals.skipped;
    } else if (!rec.state_kept) {
      ++totals.skipped;
      totals.stale.push_back(r.run_id);
    } else {
      queued.push_back(r);
      queued.back().regrade = true;
    }
  }

  // The fixtures' bin/ bundles, digested once per suite rather than once per run.
  std::vector<std::string> bin_digests(suite.fixtures.size());
  for (size_t i = 0; i < suite.fixtures.size(); ++i)
    if (suite.fixtures[i].has_bin)
      bin_digests[i] = EB_TRY_CTX(tree_digest(suite.fixtures[i].bin_dir()),
                                  fmt::format("fixture {}", suite.fixtures[i].id));

  sandbox::preparer prep(options.sandbox);
  warn_reclaim(prep);
  std::vector<bool> used(suite.fixtures.size());
  for (const auto& r : queued) used[r.fixture] = true;
  const auto say = notice_sink(options);
  // Each fixture's image, imported once per suite (or only checked, when the store has it):
  // every run then names it by id, and a bad image stops the suite before anything runs.
  const auto images = EB_TRY(resolve_fixture_images(
      suite, used, prep, options.cancel ? &options.cancel->requested : nullptr, say));
  // Each fixture's bundles, verified as they enter the bundle store (once: a later suite finds
  // them there): a mismatch stops the suite before anything runs, naming both digests.
  std::vector<std::vector<sandbox::bundle>> bundles(suite.fixtures.size());
  for (size_t i = 0; i < suite.fixtures.size(); ++i) {
    if (!used[i]) continue;
    for (const auto& b : suite.fixtures[i].bundles) {
      auto tree = prep.resolve_bundle(b.source_path, b.digest);
      if (!tree)
        return std::unexpected(std::move(tree).error().with_context(fmt::format(
            "fixture {}: bundle {} ({})", suite.fixtures[i].id, b.target, b.where.to_string())));
      bundles[i].push_back({*tree, b.digest.substr(7), b.target});
    }
  }
  // Each fixture's caches, warmed where the store has none of the same key (once: a later
  // suite finds them there), then held until the suite ends so that none is removed under a run.
  cache_options co{suite.default_limits, options.protected_roots};
  co.protected_roots.push_back(results.root());
  co.cancel = options.cancel;
  co.say = say;
  auto caches = EB_TRY(ensure_caches(suite, images, used, prep, co));
  // Each credential's requests_per_minute, one rate for every gateway in front of it.
  std::map<std::string, std::shared_ptr<gateway::request_rate>> rates;
  for (const auto& [handle, share] : suite.shared_credentials)
    if (share.requests_per_minute > 0)
      rates[handle] = std::make_shared<gateway::request_rate>(share.requests_per_minute);
  execution_context x{
      suite, adapters, options, prep, results, bin_digests, images, &bundles, &caches.per_fixture,
      &rates};

  std::vector<queued_run> queue;
  for (size_t i = 0; i < queued.size(); ++i)
    queue.push_back({i, suite.candidates[queued[i].candidate].credentials});
  scheduler_options so;
  so.retries = options.retries;
  for (const auto& [handle, share] : suite.shared_credentials)
    so.max_concurrent[handle] = share.max_concurrent;
  so.stopping = [&options] { return options.cancel && options.cancel->requested.load(); };
  scheduler sched(std::move(queue), std::move(so));
  suite_execution execution(suite, queued, options, x, results, sched, totals);
  if (!options.regrade_only) execution.count_suite_budget(already);

  int n = std::max(1, std::min<int>(options.concurrency, static_cast<int>(queued.size())));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&execution] { execution.worker(); });
  for (auto& t : threads) t.join();
  // Again at the end: a stale run whose processes were still dying at start-up (a runner
  // killed just before this one started) could not be removed then.
  warn_reclaim(prep);
  if (execution.fatal()) return std::unexpected(*execution.fatal());
  if (execution.budget_spent()) {
    totals.suite_budget_spent = *execution.budget_spent();
    totals.budget_unstarted = static_cast<int>(queued.size()) - execution.started_runs();
  }
  return totals;
}

}  // namespace runner
}  // namespace evalbox::harness
