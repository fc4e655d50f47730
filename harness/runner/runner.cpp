// The runner (see runner.h). One run's pipeline is run_executor::execute(); the workers take
// runs from the scheduler (scheduler.h), which owns the credential lease and retry rules.
#include "harness/runner/runner.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "harness/grading/grading.h"
#include "harness/results/results.h"
#include "harness/runner/scheduler.h"
#include "sandbox/base/digest.h"
#include "sandbox/base/fs.h"
#include "sandbox/base/log.h"

namespace evalbox::harness {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

std::map<std::string, std::string> base_environment() {
  return {{"PATH", "/evalbox/bin:/usr/local/bin:/usr/bin:/bin"},
          {"HOME", "/home/agent"},
          {"TMPDIR", "/tmp"},
          {"LANG", "C.UTF-8"},
          {"TERM", "dumb"},
          {"USER", "root"},
          {"LOGNAME", "root"}};
}

namespace {

std::string now_rfc3339() {
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

uint64_t ms_since(clock_type::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count());
}

uint32_t session_nonce() {
  static std::mutex mu;
  static std::mt19937 gen{std::random_device{}()};
  std::lock_guard lock(mu);
  return static_cast<uint32_t>(gen());
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// The run's usage for run.json. Cost is what the client reported; else, when the suite has a
// price for the candidate (by id) or its model and both token counts are known, an estimate
// from that table; else null — never 0. cost_source says which.
json usage_json(const usage& u, const candidate_spec& cand, const std::string& model,
                const std::map<std::string, price_spec>& prices) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json j;
  j["input_tokens"] = opt(u.input_tokens);
  j["output_tokens"] = opt(u.output_tokens);
  j["cached_input_tokens"] = opt(u.cached_input_tokens);
  j["reasoning_tokens"] = opt(u.reasoning_tokens);
  j["cost_usd"] = opt(u.cost_usd);
  j["cost_source"] = u.cost_usd ? json("client") : json(nullptr);
  if (!u.cost_usd && u.input_tokens && u.output_tokens) {
    const price_spec* price = nullptr;
    std::string setting_model;
    if (const auto* m = cand.find("model"); m && m->value.is_string())
      setting_model = m->value.get<std::string>();
    for (const std::string& key : {cand.id, setting_model, model}) {
      if (key.empty()) continue;
      if (auto it = prices.find(key); it != prices.end()) {
        price = &it->second;
        break;
      }
    }
    if (price) {
      j["cost_usd"] = (static_cast<double>(*u.input_tokens) * price->input_per_mtok +
                       static_cast<double>(*u.output_tokens) * price->output_per_mtok) /
                      1e6;
      j["cost_source"] = "price_table";
    }
  }
  return j;
}

sandbox::resource_limits effective_limits(const suite_spec& suite, const fixture_spec& f) {
  sandbox::resource_limits l;
  limits_spec spec = suite.default_limits.merged_with(f.limits);
  if (spec.wall_ms) l.wall_ms = *spec.wall_ms;
  if (spec.cpu_ms) l.cpu_ms = *spec.cpu_ms;
  if (spec.memory_bytes) l.memory_bytes = *spec.memory_bytes;
  if (spec.pids) l.pids = *spec.pids;
  if (spec.disk_bytes) l.disk_bytes = *spec.disk_bytes;
  if (spec.output_bytes) l.output_bytes = *spec.output_bytes;
  return l;
}

sandbox::network_policy to_policy(const network_spec& n) {
  sandbox::network_policy p;
  p.mode = n.mode == network_spec::mode_kind::allow ? sandbox::network_mode::allow
                                                    : sandbox::network_mode::none;
  p.allow = n.allow;
  return p;
}

// How a run ended, before it becomes run.json.
struct run_state {
  std::string execution_status = "completed";  // completed | error
  std::string error_kind;                      // setup | sandbox | agent | adapter | host
  std::string error;
  json records = json::object();  // label -> run record
  std::string session_id;         // the sandbox session (run dir, cgroups)
  json grading = nullptr;
  std::string verdict = "not_assessed";
  json usage = nullptr;
  json timings = json::object();
  bool cancelled = false;
  bool lease_busy = false;
  bool retryable = true;  // false for a request the sandbox refused as invalid: it would again
  bool infrastructure() const {
    return execution_status == "error" && error_kind != "agent" && error_kind != "adapter";
  }
};

class run_executor {
 public:
  run_executor(const suite_spec& suite, const adapter_registry& adapters,
               const runner_options& options, sandbox::preparer& prep, const results_dir& results,
               const std::vector<std::string>& bin_digests)
      : suite_(suite),
        adapters_(adapters),
        options_(options),
        preparer_(prep),
        results_(results),
        bin_digests_(bin_digests) {}

  // Runs one attempt. The prepared session is left in `session` (when preparation got that
  // far) so that the caller records the result before the sandbox is torn down.
  run_state execute(const run_spec& r, int attempt,
                    std::optional<sandbox::prepared_session>& session);

 private:
  result<sandbox::run_record> launch(const sandbox::prepared_session& s, sandbox::launch_options o,
                                     run_state& st) {
    auto rec = sandbox::launch(s, o, options_.cancel);
    if (rec) st.records[o.label] = rec->to_json();
    return rec;
  }

  const suite_spec& suite_;
  const adapter_registry& adapters_;
  const runner_options& options_;
  sandbox::preparer& preparer_;
  const results_dir& results_;
  const std::vector<std::string>& bin_digests_;  // per fixture; empty without bin/
};

run_state run_executor::execute(const run_spec& r, int attempt,
                                std::optional<sandbox::prepared_session>& session) {
  run_state st;
  const fixture_spec& fixture = suite_.fixtures[r.fixture];
  const candidate_spec& cand = suite_.candidates[r.candidate];
  const fs::path run_dir = results_.run_dir(r.run_id);
  const fs::path native = run_dir / "native";
  auto fail = [&st](std::string kind, std::string message) {
    st.execution_status = "error";
    st.error_kind = std::move(kind);
    st.error = log::scrub(message);
    return st;
  };

  (void)remove_tree(run_dir);  // a crashed earlier attempt left an unrecorded directory
  if (auto s = make_dirs(native); !s) return fail("host", s.error().message);

  const adapter* ad = adapters_.find(cand.adapter);
  if (!ad) return fail("adapter", fmt::format("no adapter named '{}'", cand.adapter));
  run_context ctx{fixture, cand, r.trial, r.run_id, suite_.credentials};
  auto plan = ad->plan(ctx);
  if (!plan) return fail("adapter", plan.error().message);

  // --- the session request -------------------------------------------------------------------
  sandbox::session_request req;
  // The session id names the run directory and cgroups, which are host-wide: two results
  // trees running the same suite at once (or a rerun racing a crashed one) must not share
  // them, so a nonce follows the deterministic run id.
  req.run_id = fmt::format("{}-{}-{:08x}", r.run_id, attempt, session_nonce());
  sandbox::resource_limits limits = effective_limits(suite_, fixture);
  req.authorized_until = std::chrono::system_clock::now() + std::chrono::hours(1) +
                         std::chrono::milliseconds(limits.wall_ms * 4);
  req.argv = plan->argv;
  req.env = base_environment();
  for (const auto& [k, v] : plan->env) req.env[k] = v;
  for (const auto& [k, v] : cand.env) req.env[k] = v;
  req.workspace.source = fixture.workspace_dir();
  req.workspace.digest = fixture.digest;
  req.home = plan->home;
  for (const auto& [target, source] : cand.home_files) {
    auto content = read_file(source, 1u << 20);
    if (!content) return fail("adapter", content.error().message);
    req.home.files.push_back({target, *content, 0644});
  }
  req.secrets = plan->secrets;
  req.bundles = plan->bundles;
  if (fixture.has_bin)
    req.bundles.push_back({fixture.bin_dir(), bin_digests_[r.fixture], "/evalbox/bin"});
  req.readonly_paths = plan->readonly_paths;
  req.protected_roots = options_.protected_roots;
  req.protected_roots.push_back(results_.root());
  if (fixture.has_grader) req.protected_roots.push_back(fixture.grader_dir());
  if (!plan->runs_fixture_solution && fixture.has_solution)
    req.protected_roots.push_back(fixture.solution_script().parent_path());
  req.limits = limits;
  req.network = to_policy(cand.network ? *cand.network : fixture.network);
  req.landlock = plan->landlock;

  auto t0 = clock_type::now();
  auto prepared = preparer_.prepare(req);
  st.timings["prepare_ms"] = ms_since(t0);
  if (!prepared) {
    // Busy with secrets to lease: another evalbox process holds the login (see the workers).
    if (prepared.error().kind == error_kind::busy && !req.secrets.empty()) st.lease_busy = true;
    st.retryable = prepared.error().kind != error_kind::invalid_argument &&
                   prepared.error().kind != error_kind::permission;
    return fail("sandbox", prepared.error().message);
  }
  session.emplace(std::move(*prepared));
  st.session_id = req.run_id;

  // --- setup ---------------------------------------------------------------------------------
  if (!fixture.setup.empty()) {
    auto t1 = clock_type::now();
    std::string script = "set -e\n";
    for (const auto& cmd : fixture.setup) script += cmd + "\n";
    sandbox::launch_options o;
    o.label = "setup";
    o.argv = {"/bin/sh", "-c", script};
    o.env = base_environment();
    o.with_secrets = false;
    o.network_override = sandbox::network_policy{};
    o.stdout_path = run_dir / "setup.log";
    o.stderr_path = run_dir / "setup.log";
    auto rec = launch(*session, o, st);
    st.timings["setup_ms"] = ms_since(t1);
    if (!rec) return fail("sandbox", rec.error().message);
    if (!rec->ok()) return fail("sandbox", rec->error);
    if (rec->outcome == sandbox::outcome_kind::cancelled) return st.cancelled = true, st;
    if (rec->outcome != sandbox::outcome_kind::exited || rec->exit_code != 0)
      return fail("setup", fmt::format("setup failed ({} {}); see runs/{}/setup.log",
                                       to_string(rec->outcome), rec->exit_code, r.run_id));
  }
  auto before = session->snapshot_workspace();
  if (!before) return fail("sandbox", before.error().message);

  // --- the agent -----------------------------------------------------------------------------
  std::vector<agent_output> outputs;
  auto t2 = clock_type::now();
  auto run_agent = [&](const agent_plan& p,
                       const std::string& label) -> std::optional<sandbox::run_record> {
    sandbox::launch_options o;
    o.label = label;
    o.argv = p.argv;
    std::map<std::string, std::string> env = req.env;
    for (const auto& [k, v] : p.env) env[k] = v;
    o.env = env;
    o.stdout_path = native / (label == "agent" ? p.stdout_name : label + "." + p.stdout_name);
    o.stderr_path = native / (label == "agent" ? "stderr.txt" : label + ".stderr.txt");
    o.stdin_data = p.stdin_data;
    auto rec = launch(*session, o, st);
    if (!rec) {
      fail("sandbox", rec.error().message);
      return std::nullopt;
    }
    if (!rec->ok()) {
      fail("sandbox", rec->error);
      return std::nullopt;
    }
    outputs.push_back({o.stdout_path, o.stderr_path, session->home_dir(), native, rec->exit_code,
                       rec->outcome == sandbox::outcome_kind::exited});
    return std::move(*rec);
  };
  auto agent_rec = run_agent(*plan, "agent");
  if (!agent_rec) return st;
  if (agent_rec->outcome == sandbox::outcome_kind::cancelled) return st.cancelled = true, st;
  if (fixture.follow_up && agent_rec->outcome == sandbox::outcome_kind::exited) {
    auto fp = ad->plan_follow_up(ctx, outputs.back());
    if (!fp) return fail("adapter", fp.error().message);
    if (*fp) {
      auto rec2 = run_agent(**fp, "follow-up");
      if (!rec2) return st;
      if (rec2->outcome == sandbox::outcome_kind::cancelled) return st.cancelled = true, st;
    }
  }
  st.timings["agent_ms"] = ms_since(t2);

  auto tr = ad->read_transcript(ctx, outputs);
  if (!tr) return fail("adapter", tr.error().message);
  fs::path transcript_path = run_dir / "transcript.jsonl";
  if (auto s = write_transcript(transcript_path, *tr); !s) return fail("host", s.error().message);
  if (!tr->total.unknown()) st.usage = usage_json(tr->total, cand, tr->model, suite_.prices);
  if (agent_rec->outcome == sandbox::outcome_kind::signaled)
    return fail("agent", fmt::format("the agent was killed by signal {}", agent_rec->signal));
  if (tr->error) return fail("agent", *tr->error);

  // --- workspace diff and grading ------------------------------------------------------------
  auto after = session->snapshot_workspace();
  if (!after) return fail("sandbox", after.error().message);
  auto t3 = clock_type::now();
  if (auto changed = session->changed_paths(*before); changed && !changed->empty()) {
    std::string script;
    size_t n = 0;
    for (const auto& p : *changed) {
      if (++n > 2000) break;
      std::string q = shell_quote(p);
      // Directories are listed too (created, removed, made opaque): their files have entries.
      script += "[ -d /evalbox/before/" + q + " ] || [ -d /workspace/" + q +
                " ] || diff -uN --no-dereference --label " + shell_quote("a/" + p) + " --label " +
                shell_quote("b/" + p) + " /evalbox/before/" + q + " /workspace/" + q + "\n";
    }
    sandbox::launch_options o;
    o.label = "diff";
    o.argv = {"/bin/sh", "-c", script + "exit 0"};
    o.env = base_environment();
    o.with_secrets = false;
    o.network_override = sandbox::network_policy{};
    o.extra_mounts.push_back({before->view, "/evalbox/before", false, false});
    o.stdout_path = run_dir / "workspace.diff";
    o.stderr_path = run_dir / "diff.log";
    if (auto rec = sandbox::launch(*session, o, options_.cancel); !rec || !rec->ok())
      log::warn("run {}: workspace diff failed: {}", r.run_id,
                rec ? rec->error : rec.error().message);
  } else {
    (void)write_file(run_dir / "workspace.diff", "");
  }

  int check_index = 0;
  shell_check_runner run_shell = [&](const check_spec& c) -> result<shell_check_outcome> {
    sandbox::launch_options o;
    o.label = fmt::format("grade-{}", check_index++);
    o.argv = {"/bin/sh", "-c", c.shell};
    o.env = base_environment();
    o.with_secrets = false;
    o.network_override = sandbox::network_policy{};
    if (fixture.has_grader)
      o.extra_mounts.push_back({fixture.grader_dir(), "/grader", false, false});
    o.extra_mounts.push_back({transcript_path, "/evalbox/transcript.jsonl", false, true});
    fs::path log_path = run_dir / "checks" / (c.id + ".log");
    EB_TRY(make_dirs(log_path.parent_path()));
    o.stdout_path = log_path;
    o.stderr_path = log_path;
    auto rec = EB_TRY(sandbox::launch(*session, o, options_.cancel));
    if (!rec.ok()) return make_error(error_kind::io, "grading sandbox: {}", rec.error);
    if (rec.outcome == sandbox::outcome_kind::cancelled)
      return make_error(error_kind::cancelled, "cancelled");
    std::string out = read_file(log_path).value_or("");
    if (out.size() > 400) out = out.substr(out.size() - 400);
    return shell_check_outcome{rec.outcome == sandbox::outcome_kind::exited, rec.exit_code,
                               std::string(to_string(rec.outcome)), out};
  };
  grading_result g = grade({fixture, *tr, before->view, after->view, run_shell});
  st.timings["grading_ms"] = ms_since(t3);
  if (options_.cancel && options_.cancel->requested.load()) return st.cancelled = true, st;
  st.grading = g.to_json(fixture.threshold);
  st.verdict = g.ok ? (g.passed ? "passed" : "failed") : "not_assessed";
  return st;  // the session stays alive until the caller has recorded the result
}

json to_run_json(const suite_spec& suite, const run_spec& r, const run_state& st,
                 const std::string& cand_digest, int attempts, const std::string& started,
                 uint64_t wall_ms) {
  const auto& f = suite.fixtures[r.fixture];
  const auto& c = suite.candidates[r.candidate];
  json j;
  j["schema"] = run_schema;
  j["run_id"] = r.run_id;
  j["suite"] = suite.name;
  j["fixture"] = {{"id", f.id}, {"digest", f.digest}};
  j["candidate"] = {{"id", c.id}, {"adapter", c.adapter}, {"digest", cand_digest}};
  j["trial"] = r.trial;
  j["attempts"] = attempts;
  json exec = {{"status", st.execution_status}, {"records", st.records}};
  exec["error"] = st.error.empty() ? json(nullptr) : json(st.error);
  exec["error_kind"] = st.error_kind.empty() ? json(nullptr) : json(st.error_kind);
  exec["session"] = st.session_id.empty() ? json(nullptr) : json(st.session_id);
  if (st.records.contains("agent")) {
    const auto& a = st.records["agent"];
    exec["outcome"] = a.value("outcome", json(nullptr));
    exec["exit_code"] = a.value("exit_code", json(nullptr));
  } else {
    exec["outcome"] = nullptr;
    exec["exit_code"] = nullptr;
  }
  j["execution"] = exec;
  j["grading"] = st.grading.is_null() ? json{{"status", "skipped"},
                                             {"checks", json::array()},
                                             {"score", nullptr},
                                             {"threshold", f.threshold},
                                             {"error", nullptr}}
                                      : st.grading;
  j["verdict"] = st.verdict;
  json usage = st.usage.is_null() ? usage_json({}, c, "", {}) : st.usage;
  j["usage"] = usage;
  json timings = st.timings;
  timings["started_at"] = started;
  timings["finished_at"] = now_rfc3339();
  timings["wall_ms"] = wall_ms;
  j["timings"] = timings;
  return j;
}

}  // namespace

result<run_totals> run_suite(const suite_spec& suite, const std::vector<run_spec>& runs,
                             const adapter_registry& adapters, const runner_options& options) {
  // Absolute from here on: the results root is also a protected root of every session.
  results_dir results(normalize(options.results_dir));
  EB_TRY_CTX(results.create(), "results directory");
  run_totals totals;
  totals.planned = static_cast<int>(runs.size());

  std::set<std::string> done;
  if (options.resume) done = EB_TRY(results.recorded_ids());
  std::vector<run_spec> queued;
  for (const auto& r : runs) {
    if (done.count(r.run_id))
      ++totals.skipped;
    else
      queued.push_back(r);
  }

  // The fixtures' bin/ bundles, digested once per suite rather than once per run.
  std::vector<std::string> bin_digests(suite.fixtures.size());
  for (size_t i = 0; i < suite.fixtures.size(); ++i)
    if (suite.fixtures[i].has_bin)
      bin_digests[i] = EB_TRY_CTX(tree_digest(suite.fixtures[i].bin_dir()),
                                  fmt::format("fixture {}", suite.fixtures[i].id));

  sandbox::preparer prep(options.sandbox);
  if (auto rec = prep.reclaim_stale(); !rec) {
    log::warn("reclaim: {}", rec.error().message);
  } else {
    for (const auto& e : rec->errors) log::warn("reclaim: {}", e);
  }
  run_executor exec(suite, adapters, options, prep, results, bin_digests);

  std::vector<queued_run> queue;
  for (size_t i = 0; i < queued.size(); ++i)
    queue.push_back({i, suite.candidates[queued[i].candidate].credentials});
  auto stopping = [&] { return options.cancel && options.cancel->requested.load(); };
  scheduler_options so;
  so.retries = options.retries;
  so.stopping = stopping;
  scheduler sched(std::move(queue), std::move(so));

  std::mutex mu;
  progress prog;
  prog.total = static_cast<int>(queued.size());
  auto started = clock_type::now();
  std::optional<error> fatal;

  // Each worker: a run from the scheduler, its attempts, its record, its teardown; the ticket
  // holds the run's leases until the teardown is done.
  auto worker = [&] {
    while (auto ticket = sched.next()) {
      const run_spec& r = queued[ticket->run()];
      auto t0 = clock_type::now();
      std::string started_at = now_rfc3339();
      run_state st;
      std::optional<sandbox::prepared_session> session;
      auto teardown = [&] {
        if (!session) return;
        if (auto s = session->close(); !s)
          log::warn("run {}: teardown: {}", r.run_id, s.error().message);
        session.reset();
      };
      const int attempt = sched.attempts(r.run_id, [&](int n) -> attempt_report {
        teardown();
        st = exec.execute(r, n, session);
        if (st.cancelled) return {attempt_end::cancelled, {}};
        if (st.lease_busy) return {attempt_end::lease_held_elsewhere, {}};
        if (st.infrastructure() && st.retryable)
          return {attempt_end::infrastructure_error, st.error_kind + ": " + st.error};
        return {attempt_end::done, {}};
      });
      bool recorded = false;
      if (!st.cancelled && !stopping()) {
        json j =
            to_run_json(suite, r, st, r.candidate_digest, attempt + 1, started_at, ms_since(t0));
        if (auto s = results.record(j); !s) {
          std::lock_guard lock(mu);
          fatal = s.error();
          sched.stop();
        } else {
          recorded = true;
        }
      }
      teardown();  // only now: the result is on disk before the sandbox goes away
      if (!recorded) continue;
      std::lock_guard lock(mu);
      ++prog.done;
      if (st.execution_status == "error")
        ++totals.execution_errors, ++prog.errors;
      else if (st.verdict == "not_assessed")
        ++totals.grader_errors, ++prog.errors;
      else if (st.verdict == "passed")
        ++totals.passed, ++prog.passed;
      else
        ++totals.failed, ++prog.failed;
      prog.elapsed_s = std::chrono::duration<double>(clock_type::now() - started).count();
      prog.last = fmt::format(
          "{}/{}#{}: {}", suite.fixtures[r.fixture].id, suite.candidates[r.candidate].id, r.trial,
          st.execution_status == "error" ? "error (" + st.error_kind + ")" : st.verdict);
      if (options.on_progress) options.on_progress(prog);
    }
  };

  int n = std::max(1, std::min<int>(options.concurrency, static_cast<int>(queued.size())));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  // Again at the end: a stale run whose processes were still dying at start-up (a runner
  // killed just before this one started) could not be removed then.
  if (auto rec = prep.reclaim_stale(); !rec) {
    log::warn("reclaim: {}", rec.error().message);
  } else {
    for (const auto& e : rec->errors) log::warn("reclaim: {}", e);
  }
  if (fatal) return std::unexpected(*fatal);
  return totals;
}

}  // namespace evalbox::harness
