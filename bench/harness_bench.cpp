// Harness throughput: `evalbox run` of N noop runs (each an agent sandbox, a grading sandbox
// and an fsynced result) at concurrency 1 and 2, the runner's peak RSS at 100 vs 1,000 runs,
// and the sandbox work of one such run done in-process (the bare cost the harness adds to).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "bench/bench_support.h"
#include "sandbox/base/unique_fd.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/mount/mount.h"

namespace evalbox::bench {
namespace {
namespace fs = std::filesystem;
using namespace evalbox::sandbox;

bench_env& env() {
  static bench_env e;
  return e;
}

// The noop fixture: a one-file workspace, a shell check (the grading sandbox) and a file check.
result<fs::path> ensure_fixture() {
  const fs::path dir = cache_dir() / "harness";
  const fs::path fx = dir / "noop-fixture";
  EB_TRY(make_dirs(fx / "workspace", 0755));
  EB_TRY(make_dirs(fx / "grader", 0755));
  ::chmod(cache_dir().c_str(), 0755);
  ::chmod(dir.c_str(), 0755);
  EB_TRY(write_file(fx / "workspace" / "README.md", "bench\n"));
  EB_TRY(write_file(fx / "grader" / "ok.sh", "#!/bin/sh\nexit 0\n", 0755));
  EB_TRY(write_file(fx / "fixture.yaml",
                    "schema: evalbox.fixture.v1\n"
                    "id: bench-noop\n"
                    "prompt: Do nothing.\n"
                    "limits: {wall: 1m, memory: 256MiB, pids: 64, disk: 64MiB, output: 1MiB}\n"
                    "checks:\n"
                    "  - {id: grader-runs, shell: \"sh /grader/ok.sh\"}\n"
                    "  - {id: readme, file: {path: README.md, exists: true}}\n"));
  return dir;
}

result<fs::path> write_suite(int runs, int concurrency) {
  const fs::path dir = EB_TRY(ensure_fixture());
  const fs::path suite = dir / fmt::format("suite-{}x{}.yaml", runs, concurrency);
  EB_TRY(write_file(suite, fmt::format("schema: evalbox.suite.v1\n"
                                       "name: bench-noop\n"
                                       "fixtures: [noop-fixture]\n"
                                       "candidates:\n"
                                       "  - {{id: noop, adapter: noop}}\n"
                                       "trials: {}\n"
                                       "concurrency: {}\n",
                                       runs, concurrency)));
  return suite;
}

uint64_t vm_hwm_kb(pid_t pid) {
  auto status = read_file(fmt::format("/proc/{}/status", pid));
  if (!status) return 0;
  const auto at = status->find("VmHWM:");
  if (at == std::string::npos) return 0;
  return std::strtoull(status->c_str() + at + 6, nullptr, 10);
}

// Counts the lines of a file that only grows, reading only what was appended since the last
// call: cheap enough to poll every 10 ms while a 1,000-run suite writes results.jsonl.
class line_counter {
 public:
  explicit line_counter(fs::path path) : path_(std::move(path)) {}
  int count() {
    unique_fd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return lines_;
    char buf[65536];
    for (;;) {
      ssize_t n = ::pread(fd.get(), buf, sizeof buf, offset_);
      if (n <= 0) break;
      offset_ += n;
      lines_ += static_cast<int>(std::count(buf, buf + n, '\n'));
    }
    return lines_;
  }

 private:
  fs::path path_;
  off_t offset_ = 0;
  int lines_ = 0;
};

// Runs `evalbox run` to completion; sets the manual time and the counters.
void bm_run(benchmark::State& state, int runs, int concurrency) {
  auto suite = write_suite(runs, concurrency);
  if (!suite) return state.SkipWithError(suite.error().message.c_str());
  for (auto _ : state) {
    const fs::path work = env().dir() / next_run_id("harness");
    (void)make_dirs(work, 0755);
    const std::string results = (work / "results").string();
    const std::string state_env = "EVALBOX_STATE_DIR=" + (work / "state").string();
    const std::string helper_env = std::string("EVALBOX_HELPER=") + EVALBOX_BENCH_HELPER;
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::putenv(const_cast<char*>(state_env.c_str()));
      ::putenv(const_cast<char*>(helper_env.c_str()));
      const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(EVALBOX_BENCH_EVALBOX, "evalbox", "run", suite->c_str(), "--results", results.c_str(),
              nullptr);
      ::_exit(127);
    }
    // VmHWM only grows; polled until exit, it is the runner's own peak (children excluded).
    // The peak while runs are still being recorded is kept apart from the overall peak, which
    // includes writing the reports after the last run.
    uint64_t hwm = 0;
    uint64_t hwm_running = 0;
    bool all_recorded = false;
    line_counter recorded(work / "results" / "results.jsonl");
    int st = 0;
    rusage ru{};
    while (::wait4(pid, &st, WNOHANG, &ru) == 0) {
      hwm = std::max(hwm, vm_hwm_kb(pid));
      if (!all_recorded) {
        all_recorded = recorded.count() >= runs;
        if (!all_recorded) hwm_running = hwm;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(secs);
    // 0: every run passed, 1: some task failed; anything else is a harness failure.
    if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
      return state.SkipWithError(fmt::format("evalbox run exited with status {:#x}", st).c_str());
    state.counters["runs_per_s"] = runs / secs;
    state.counters["ms_per_run"] = secs * 1000.0 / runs;
    state.counters["peak_rss_kb"] = static_cast<double>(hwm);
    state.counters["runs_rss_kb"] = static_cast<double>(hwm_running);
    state.counters["tree_maxrss_kb"] = static_cast<double>(ru.ru_maxrss);
    (void)sandbox::mount::unmount_all_under(work);
    (void)remove_tree(work);
  }
}

// What one noop run's sandboxes cost without the harness: prepare the same one-file workspace,
// launch /bin/true (agent), launch `sh /grader/ok.sh` (grading, extra read-only mounts), close.
void bm_bare(benchmark::State& state) {
  auto dir = ensure_fixture();
  if (!dir) return state.SkipWithError(dir.error().message.c_str());
  const fs::path fx = *dir / "noop-fixture";
  (void)write_file(env().dir() / "transcript.jsonl", "{}\n", 0644);
  for (auto _ : state) {
    auto req = env().request(fx / "workspace", workspace_strategy::auto_select);
    req.secrets.clear();
    auto session = env().preparer().prepare(req);
    if (!session) return state.SkipWithError(session.error().message.c_str());
    launch_options agent;
    auto a = launch(*session, agent);
    launch_options grade;
    grade.label = "grade";
    grade.argv = {"/bin/sh", "/grader/ok.sh"};
    grade.with_secrets = false;
    grade.extra_mounts = {
        {fx / "grader", "/grader", false, false},
        {env().dir() / "transcript.jsonl", "/evalbox/transcript.jsonl", false, true}};
    auto g = launch(*session, grade);
    if (!a || !a->ok() || !g || !g->ok() || g->exit_code != 0)
      return state.SkipWithError("a launch failed");
    (void)session->close();
  }
}

void register_all() {
  benchmark::RegisterBenchmark("harness/bare_agent_plus_grading", bm_bare)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  const int runs =
      std::getenv("EVALBOX_BENCH_RUNS") ? std::atoi(std::getenv("EVALBOX_BENCH_RUNS")) : 200;
  for (auto [n, c] :
       {std::pair{runs, 1}, std::pair{runs, 2}, std::pair{runs / 2, 2}, std::pair{runs * 5, 2}}) {
    benchmark::RegisterBenchmark(
        fmt::format("harness/run_noop/runs:{}/concurrency:{}", n, c).c_str(),
        [n, c](benchmark::State& st) { bm_run(st, n, c); })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace evalbox::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::setenv("EVALBOX_HELPER", EVALBOX_BENCH_HELPER, 0);
  evalbox::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
