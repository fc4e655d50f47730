// Beyond one machine: `evalbox merge` of synthetic shards (4 shards of 10,000 and 100,000
// records shaped like real ones, each run with a directory of two files) — its time, CPU and
// peak memory against two floors — reading the same records once, and `cp -al` of the same run
// directories into one (the file system's share of any merge) — the share of it that is the
// reports (what `evalbox report` of the merged directory costs), a merge that finds nothing
// new — and what sharding costs over a plain run of the same noop runs.
//
// scripts/bench-scale runs it and prints the figures docs/performance.md records ("Scale-out").
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>

#include "base/digest.h"
#include "bench/bench_support.h"
#include "harness/plan/identity.h"
#include "harness/results/results.h"

namespace evalbox::bench {
namespace {
namespace fs = std::filesystem;
using harness::matrix_run;
using harness::plan_identity;

constexpr int shards = 4;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_seconds(const rusage& u) {
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// A plan of `records` runs: 4 candidates × records/40 fixtures × 10 trials.
plan_identity synthetic_plan(int records) {
  plan_identity p;
  p.suite = "synthetic";
  p.suite_digest = sha256_hex("suite");
  for (int f = 0; f < records / 40; ++f) {
    std::string id = fmt::format("fixture-{:05}", f);
    p.fixtures.push_back({id, sha256_hex(id)});
  }
  for (const char* c : {"baseline", "tuned", "other", "oracle"})
    p.candidates.push_back({c, "command", sha256_hex(c)});
  p.trials = 10;
  p.baseline = "baseline";
  p.shard_count = shards;
  return p;
}

// A record shaped like those `evalbox run` writes (docs/results.md), about 2.5 KB in canonical
// form: the agent launch's run record with its mechanisms and limits, seven checks, usage and
// timings. Its shape matters more than its size: a reader's cost is per value, not per byte.
std::string record_line(const plan_identity& p, const matrix_run& r) {
  const uint32_t seed = r.fixture * 7 + r.candidate * 3 + static_cast<uint32_t>(r.trial);
  const bool passed = seed % 5 < 3;
  auto limit = [](std::initializer_list<const char*> by, uint64_t value) {
    return json{{"by", json(by)}, {"value", value}};
  };
  json checks = json::array();
  for (int c = 0; c < 7; ++c)
    checks.push_back({{"detail", passed || c != 3 ? "" : "expected 8080, found 80"},
                      {"id", fmt::format("check-{}", c)},
                      {"kind", c == 0 ? "shell" : "file"},
                      {"passed", passed || c != 3},
                      {"weight", 1.0}});
  json agent = {{"binding_digest", sha256_hex(r.run_id)},
                {"connections", json::array()},
                {"cpu_ms", 20 + seed % 50},
                {"error", nullptr},
                {"error_step", nullptr},
                {"exit_code", 0},
                {"mechanisms",
                 {{"capabilities", "none"},
                  {"cgroup", "v1"},
                  {"landlock_abi", 7},
                  {"limits",
                   {{"cpu_ms", limit({"cgroup v1 accounting", "RLIMIT_CPU"}, 600000)},
                    {"disk_bytes", limit({"RLIMIT_FSIZE", "tmpfs size"}, 268435456)},
                    {"memory_bytes", limit({"cgroup v1"}, 1073741824)},
                    {"output_bytes", limit({"helper"}, 4194304)},
                    {"pids", limit({"cgroup v1"}, 256)},
                    {"wall_ms", limit({"helper"}, 300000)}}},
                  {"network", "none"},
                  {"no_new_privs", true},
                  {"seccomp_digest", sha256_hex("seccomp")},
                  {"user_ns", {{"host_gid", 60000}, {"host_uid", 60000}}}}},
                {"outcome", "exited"},
                {"output_bytes", seed % 4096},
                {"output_truncated", false},
                {"peak_memory_bytes", 4947968 + seed},
                {"pids_limit_hit", false},
                {"schema", "evalbox.run-record.v1"},
                {"signal", nullptr},
                {"wall_ms", 60 + seed % 100}};
  json j = {
      {"attempts", 1},
      {"candidate",
       {{"adapter", "command"},
        {"digest", p.candidates[r.candidate].digest},
        {"id", p.candidates[r.candidate].id}}},
      {"execution",
       {{"error", nullptr},
        {"error_kind", nullptr},
        {"exit_code", 0},
        {"outcome", "exited"},
        {"records", {{"agent", agent}}},
        {"session", r.run_id + "-0-b7b887f0"},
        {"status", "completed"}}},
      {"fixture", {{"digest", p.fixtures[r.fixture].digest}, {"id", p.fixtures[r.fixture].id}}},
      {"grading",
       {{"checks", checks},
        {"error", nullptr},
        {"score", passed ? 1.0 : 6.0 / 7.0},
        {"status", "completed"},
        {"threshold", 1.0}}},
      {"run_id", r.run_id},
      {"schema", "evalbox.run.v1"},
      {"suite", p.suite},
      {"timings",
       {{"agent_ms", 62 + seed % 1000},
        {"finished_at", "2026-12-01T16:47:12Z"},
        {"grading_ms", 100},
        {"prepare_ms", 0},
        {"started_at", "2026-12-01T16:47:11Z"},
        {"wall_ms", 175 + seed % 1000}}},
      {"trial", r.trial},
      {"usage",
       {{"cached_input_tokens", nullptr},
        {"cost_source", "table"},
        {"cost_usd", 0.01 + (seed % 100) / 1000.0},
        {"input_tokens", 1000 + seed % 5000},
        {"output_tokens", 200 + seed % 300},
        {"reasoning_tokens", nullptr}}},
      {"verdict", passed ? "passed" : "failed"}};
  return canonical_json(j) + "\n";
}

// 4 shards of `records` runs under the bench cache, generated once: each shard's plan.json,
// results.jsonl and runs/<id>/{run.json,transcript.jsonl}, as `evalbox run --shard K/4` leaves
// them.
result<fs::path> ensure_shards(int records) {
  const fs::path root = cache_dir() / "merge" / fmt::format("records-{}-v2", records);
  if (fs::exists(root / "complete")) return root;
  (void)remove_tree(root);
  const plan_identity plan = synthetic_plan(records);
  std::vector<std::ofstream> lines;
  for (int k = 0; k < shards; ++k) {
    const fs::path dir = root / "shards" / std::to_string(k);
    EB_TRY(make_dirs(dir / "runs"));
    plan_identity p = plan;
    p.shard_index = k;
    EB_TRY(harness::write_plan(dir, p));
    lines.emplace_back(dir / "results.jsonl", std::ios::binary);
  }
  for (const auto& r : harness::matrix_runs(plan)) {
    const fs::path dir = root / "shards" / std::to_string(r.shard);
    const std::string line = record_line(plan, r);
    lines[static_cast<size_t>(r.shard)] << line;
    const fs::path run = dir / "runs" / r.run_id;
    EB_TRY(make_dirs(run));
    EB_TRY(write_file(run / "run.json", line));
    EB_TRY(write_file(run / "transcript.jsonl", "{\"type\":\"message\"}\n"));
  }
  for (auto& l : lines) {
    l.close();
    if (!l) return make_error(error_kind::io, "writing the shards under {}", root.string());
  }
  EB_TRY(write_file(root / "complete", ""));
  return root;
}

// The merged directories of this run, removed once every benchmark is done (see bm_merge).
std::vector<fs::path>& merged_trees() {
  static std::vector<fs::path> trees;
  return trees;
}

// merge/records:N. In each iteration, one after the other on the same files:
//   read_once  every record of the 4 shards parsed once (results_dir::for_each_record, what
//              every reader of results.jsonl does): the floor;
//   merge      `evalbox merge` of the 4 shards into a fresh directory (run directories
//              hard-linked, every report written), in a child: its wall time (the benchmark's
//              time), CPU time and peak RSS;
//   link_floor `cp -al` of the 4 shards' run directories into one fresh directory on the same
//              file system, after the merge (so it finds the source directories cached): the
//              kernel's part of any merged directory that stands alone, whatever writes it;
//   reports    `evalbox report` of the merged directory: the part of the merge that is the
//              reports (the same code, from the same results.jsonl);
//   again      `evalbox merge` of the same shards into the merged directory: nothing to add.
void bm_merge(benchmark::State& state) {
  const int records = static_cast<int>(state.range(0));
  auto root = ensure_shards(records);
  if (!root) return state.SkipWithError(root.error().message.c_str());
  std::vector<std::string> merge = {EVALBOX_BENCH_EVALBOX, "merge"};
  for (int k = 0; k < shards; ++k) merge.push_back((*root / "shards" / std::to_string(k)).string());
  merge.push_back("--into");
  merge.push_back("");
  double read_s = 0, merge_cpu = 0, link_s = 0, report_s = 0, again_s = 0, rss_kb = 0,
         again_rss_kb = 0;
  for (auto _ : state) {
    // A directory never used, and none removed before the last benchmark: on ext4 the first
    // large merge after a large removal paid twice the kernel time (its new inodes allocated
    // among the ones just freed), which measured the file system's state, not the merge.
    const fs::path into = *root / next_run_id("merged");
    merge.back() = into.string();
    auto t = std::chrono::steady_clock::now();
    size_t read = 0;
    for (int k = 0; k < shards; ++k) {
      harness::results_dir dir(*root / "shards" / std::to_string(k));
      auto walked = dir.for_each_record([&](const json&, harness::record_location) -> status {
        ++read;
        return {};
      });
      if (!walked) return state.SkipWithError(walked.error().message.c_str());
    }
    read_s += seconds_since(t);
    if (read != static_cast<size_t>(records))
      return state.SkipWithError("the shards do not hold every record");

    t = std::chrono::steady_clock::now();
    child_result merged = run_child(merge);
    const double merge_s = seconds_since(t);
    if (merged.status != 0) return state.SkipWithError("evalbox merge failed");
    state.SetIterationTime(merge_s);
    merge_cpu += cpu_seconds(merged.usage);
    rss_kb = std::max(rss_kb, static_cast<double>(merged.usage.ru_maxrss));

    const fs::path linked = *root / next_run_id("linked");
    std::error_code ec;
    fs::create_directories(linked / "runs", ec);
    if (ec) return state.SkipWithError("cannot make the cp -al directory");
    merged_trees().push_back(linked);
    t = std::chrono::steady_clock::now();
    for (int k = 0; k < shards; ++k) {
      const fs::path from = *root / "shards" / std::to_string(k) / "runs" / ".";
      if (run_child({"/bin/cp", "-al", from.string(), (linked / "runs").string()}).status != 0)
        return state.SkipWithError("cp -al of the run directories failed");
    }
    link_s += seconds_since(t);

    t = std::chrono::steady_clock::now();
    if (run_child({EVALBOX_BENCH_EVALBOX, "report", into.string()}).status != 0)
      return state.SkipWithError("evalbox report failed");
    report_s += seconds_since(t);

    t = std::chrono::steady_clock::now();
    child_result again = run_child(merge);
    again_s += seconds_since(t);
    if (again.status != 0) return state.SkipWithError("evalbox merge (again) failed");
    again_rss_kb = std::max(again_rss_kb, static_cast<double>(again.usage.ru_maxrss));
    merged_trees().push_back(into);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["read_once_s"] = read_s / n;
  state.counters["merge_cpu_s"] = merge_cpu / n;
  state.counters["link_floor_s"] = link_s / n;
  state.counters["reports_s"] = report_s / n;
  state.counters["again_s"] = again_s / n;
  state.counters["peak_rss_mb"] = rss_kb / 1024.0;
  state.counters["again_peak_rss_mb"] = again_rss_kb / 1024.0;
  state.counters["records_per_s"] = benchmark::Counter(
      static_cast<double>(records), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(bm_merge)
    ->Name("merge/records")
    ->Arg(10'000)
    ->Arg(100'000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The noop suite of the harness benchmark: a one-file workspace and a shell check.
result<fs::path> noop_suite(int runs) {
  const fs::path dir = cache_dir() / "scale";
  const fs::path fx = dir / "noop-fixture";
  EB_TRY(make_dirs(fx / "workspace", 0755));
  EB_TRY(make_dirs(fx / "grader", 0755));
  // The sandboxes read the fixture as an unprivileged user.
  ::chmod(cache_dir().c_str(), 0755);
  ::chmod(dir.c_str(), 0755);
  EB_TRY(write_file(fx / "workspace" / "README.md", "bench\n"));
  EB_TRY(write_file(fx / "grader" / "ok.sh", "#!/bin/sh\nexit 0\n", 0755));
  EB_TRY(write_file(fx / "fixture.yaml",
                    "schema: evalbox.fixture.v1\nid: bench-noop\nprompt: Do nothing.\n"
                    "limits: {wall: 1m, memory: 256MiB, pids: 64, disk: 64MiB, output: 1MiB}\n"
                    "checks:\n  - {id: grader-runs, shell: \"sh /grader/ok.sh\"}\n"));
  const fs::path suite = dir / fmt::format("suite-{}.yaml", runs);
  EB_TRY(write_file(suite, fmt::format("schema: evalbox.suite.v1\nname: bench-noop\n"
                                       "fixtures: [noop-fixture]\n"
                                       "candidates:\n  - {{id: noop, adapter: noop}}\n"
                                       "trials: {}\nconcurrency: 2\n",
                                       runs)));
  return suite;
}

// shard/noop_runs:N. The same N runs three ways, alternating in every iteration so that the
// machine's load falls on all three alike:
//   plain  `evalbox run` into RESULTS (a `--shard 0/1` run is the same run: one shard writes
//          into RESULTS itself);
//   two    `evalbox run --shard K/2` for K = 0, 1 one after the other (each into
//          RESULTS/shards/K), then `evalbox merge` of both into RESULTS;
//   four   the same with 4 shards.
// What a shard adds is its own process (loading the suite, planning, its plan.json, its own
// reports) and its share of the merge. The benchmark's time is the plain run's; the counters
// give each way in ms per run, the merge's part of it, and the ratio of each way to plain.
void bm_shard_overhead(benchmark::State& state) {
  const int runs = static_cast<int>(state.range(0));
  auto suite = noop_suite(runs);
  if (!suite) return state.SkipWithError(suite.error().message.c_str());
  const fs::path scratch_root = cache_dir() / "scale" / "scratch";
  constexpr int splits[] = {1, 2, 4};
  double total[3] = {}, merging[3] = {};
  // One way into a fresh directory; false when a command failed.
  auto way = [&](int w) -> bool {
    const fs::path work = scratch_root / next_run_id("shard");
    (void)remove_tree(work);
    (void)make_dirs(work, 0755);
    const std::string results = (work / "results").string();
    const std::vector<std::string> env = {"EVALBOX_HELPER=" + std::string(EVALBOX_BENCH_HELPER),
                                          "EVALBOX_STATE_DIR=" + (work / "state").string()};
    const int split = splits[w];
    std::vector<std::string> merge = {EVALBOX_BENCH_EVALBOX, "merge"};
    const auto t = std::chrono::steady_clock::now();
    bool ok = true;
    for (int k = 0; ok && k < split; ++k) {
      std::vector<std::string> argv = {EVALBOX_BENCH_EVALBOX, "run", suite->string(), "--results",
                                       results};
      if (split > 1) {
        argv.push_back("--shard");
        argv.push_back(fmt::format("{}/{}", k, split));
        merge.push_back(results + "/shards/" + std::to_string(k));
      }
      ok = run_child(argv, env).status == 0;
    }
    if (ok && split > 1) {
      merge.push_back("--into");
      merge.push_back(results);
      const auto m = std::chrono::steady_clock::now();
      ok = run_child(merge).status == 0;
      merging[w] += seconds_since(m);
    }
    total[w] += seconds_since(t);
    (void)remove_tree(work);
    return ok;
  };
  int round = 0;
  for (auto _ : state) {
    const double plain_before = total[0];
    // The order rotates each round: no way always runs first (cold) or last.
    for (int i = 0; i < 3; ++i)
      if (!way((i + round) % 3)) return state.SkipWithError("evalbox run or merge failed");
    ++round;
    state.SetIterationTime(total[0] - plain_before);
  }
  const double n = static_cast<double>(state.iterations()) * runs;
  state.counters["plain_ms_per_run"] = total[0] * 1000.0 / n;
  state.counters["two_ms_per_run"] = total[1] * 1000.0 / n;
  state.counters["four_ms_per_run"] = total[2] * 1000.0 / n;
  state.counters["two_merge_ms_per_run"] = merging[1] * 1000.0 / n;
  state.counters["four_merge_ms_per_run"] = merging[2] * 1000.0 / n;
  state.counters["two_ratio"] = total[1] / total[0];
  state.counters["four_ratio"] = total[2] / total[0];
}
BENCHMARK(bm_shard_overhead)
    ->Name("shard/noop_runs")
    ->Arg(200)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace evalbox::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const auto& tree : evalbox::bench::merged_trees()) (void)evalbox::remove_tree(tree);
  return 0;
}
