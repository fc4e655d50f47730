// Harness throughput: `evalbox run` of N noop runs (each an agent sandbox, a grading sandbox
// and an fsynced result) at concurrency 1 and 2, the warm helper against a cold one at
// concurrency 1, its scaling with concurrency 1, 2 and 4 (runs interleaved, with the CPU time
// per run, beside the machine's own floors at the same concurrency), the runner's peak RSS at
// 100 vs 1,000 runs, and the sandbox work of one such run done in-process (the bare cost the
// harness adds to).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "bench/bench_support.h"
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

// One `evalbox run` of the noop suite, measured from outside.
struct suite_run {
  double secs = 0;
  double cpu_secs = 0;  // user + system of the runner and every helper it waited for
  // CPU time of the whole machine meanwhile (/proc/stat: every process, kernel threads and
  // interrupts too — the kernel's deferred teardown of namespaces and cgroups is in it).
  double machine_cpu_secs = 0;
  uint64_t hwm_kb = 0;
  uint64_t hwm_running_kb = 0;
  long tree_maxrss_kb = 0;
};

// Busy CPU time of the whole machine since boot, in seconds: every field of /proc/stat's "cpu"
// line but idle and iowait.
double machine_busy_secs() {
  auto text = read_file("/proc/stat");
  if (!text) return 0;
  std::istringstream in(*text);
  std::string cpu;
  in >> cpu;
  unsigned long long total = 0, idle = 0, v = 0;
  for (int field = 0; field < 8 && in >> v; ++field) {
    total += v;
    if (field == 3 || field == 4) idle += v;
  }
  return static_cast<double>(total - idle) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double load_average() {
  double la = 0;
  if (auto text = read_file("/proc/loadavg")) la = std::strtod(text->c_str(), nullptr);
  return la;
}

// Runs `evalbox run` of `suite` (`runs` runs) to completion in a fresh state and results root;
// `cold`: with EVALBOX_WARM_HELPER=0 (every launch starts its own helper).
result<suite_run> run_suite_once(const fs::path& suite, int runs, bool cold = false) {
  const fs::path work = env().dir() / next_run_id("harness");
  (void)make_dirs(work, 0755);
  const std::string results = (work / "results").string();
  const std::string state_env = "EVALBOX_STATE_DIR=" + (work / "state").string();
  const std::string helper_env = std::string("EVALBOX_HELPER=") + EVALBOX_BENCH_HELPER;
  const auto t0 = std::chrono::steady_clock::now();
  const double busy0 = machine_busy_secs();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::putenv(const_cast<char*>(state_env.c_str()));
    ::putenv(const_cast<char*>(helper_env.c_str()));
    if (cold) ::setenv("EVALBOX_WARM_HELPER", "0", 1);
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(EVALBOX_BENCH_EVALBOX, "evalbox", "run", suite.c_str(), "--results", results.c_str(),
            nullptr);
    ::_exit(127);
  }
  // VmHWM only grows; polled until exit, it is the runner's own peak (children excluded).
  // The peak while runs are still being recorded is kept apart from the overall peak, which
  // includes writing the reports after the last run.
  suite_run out;
  bool all_recorded = false;
  line_counter recorded(work / "results" / "results.jsonl");
  int st = 0;
  rusage ru{};
  while (::wait4(pid, &st, WNOHANG, &ru) == 0) {
    out.hwm_kb = std::max(out.hwm_kb, vm_hwm_kb(pid));
    if (!all_recorded) {
      all_recorded = recorded.count() >= runs;
      if (!all_recorded) out.hwm_running_kb = out.hwm_kb;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  out.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.machine_cpu_secs = machine_busy_secs() - busy0;
  out.cpu_secs = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  out.tree_maxrss_kb = ru.ru_maxrss;
  (void)sandbox::mount::unmount_all_under(work);
  // The suite's files stay until the benchmark process ends (its temporary directory goes
  // then). Deleting thousands of them here taxed the next suites on an ext4 without a journal
  // (this machine's): every inode allocated there skips, one by one, those freed in the last
  // minute (six while their inode table block is dirty; recently_deleted): 10-14 % of all CPU
  // samples at concurrency 1.
  // 0: every run passed, 1: some task failed; anything else is a harness failure.
  if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
    return make_error(error_kind::internal, "evalbox run exited with status {:#x}", st);
  return out;
}

// Runs `evalbox run` to completion; sets the manual time and the counters.
void bm_run(benchmark::State& state, int runs, int concurrency) {
  auto suite = write_suite(runs, concurrency);
  if (!suite) return state.SkipWithError(suite.error().message.c_str());
  for (auto _ : state) {
    auto r = run_suite_once(*suite, runs);
    if (!r) return state.SkipWithError(r.error().message.c_str());
    state.SetIterationTime(r->secs);
    state.counters["runs_per_s"] = runs / r->secs;
    state.counters["ms_per_run"] = r->secs * 1000.0 / runs;
    state.counters["cpu_ms_per_run"] = r->cpu_secs * 1000.0 / runs;
    state.counters["peak_rss_kb"] = static_cast<double>(r->hwm_kb);
    state.counters["runs_rss_kb"] = static_cast<double>(r->hwm_running_kb);
    state.counters["tree_maxrss_kb"] = static_cast<double>(r->tree_maxrss_kb);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The machine's own floors at the same concurrency, measured in the same rounds as
// harness/scaling: what 1, 2 and 4 workers (threads of this process) get done of a fixed
// total, so that evalbox's speed-up can be read against what the machine gives work of each
// kind. `spin` only computes (no system call, no memory but a register's worth): its speed-up
// says how many cores there are. `spawn_true` starts `/bin/true` with posix_spawn and waits,
// and `unshare` does the same with `unshare -Urmpn --fork --mount-proc /bin/true`: an address
// space made and torn down per start, and for `unshare` five namespaces — what every sandbox
// is made of. On a guest whose page tables the hypervisor keeps (PVM, shadow paging), making
// and tearing down address spaces scales far worse than computing does
// (docs/performance-log.md, "What the machine gives concurrency 2").
struct floor_kind {
  const char* name;
  int total;  // units of work per concurrency, split among the workers
  bool (*unit)();
};

bool spin_unit() {
  volatile unsigned long x = 0;
  for (unsigned long i = 0; i < 4'000'000; ++i) x = x + i;  // 1.2-1.7 ms here
  return true;
}

bool spawn_true_unit() { return run_child({"/bin/true"}).status == 0; }

bool unshare_unit() {
  return run_child({"/usr/bin/unshare", "-Urmpn", "--fork", "--mount-proc", "/bin/true"}).status ==
         0;
}

struct floor_round {
  double per_s = 0;       // units per second
  double cores_busy = 0;  // the machine's busy CPU time ÷ wall time
  bool ok = true;
};

floor_round run_floor(const floor_kind& kind, int concurrency) {
  // The kernel's workers finish tearing down what the run before left (namespaces, mounts)
  // first: they would take a core from the floor's workers.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<std::thread> workers;
  std::vector<char> ok(static_cast<size_t>(concurrency), 1);
  const auto t0 = std::chrono::steady_clock::now();
  const double busy0 = machine_busy_secs();
  for (int w = 0; w < concurrency; ++w) {
    const int share = kind.total / concurrency + (w < kind.total % concurrency ? 1 : 0);
    workers.emplace_back([&kind, &ok, w, share] {
      for (int i = 0; i < share; ++i)
        if (!kind.unit()) ok[static_cast<size_t>(w)] = 0;
    });
  }
  for (auto& t : workers) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  floor_round r;
  r.per_s = kind.total / secs;
  r.cores_busy = (machine_busy_secs() - busy0) / secs;
  r.ok = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
  return r;
}

// Throughput against cores: rounds of `evalbox run` at concurrency 1, 2 and 4 in turn (so a
// change in the machine's load hits every concurrency alike), medians of the rounds. Per
// concurrency C: runs/s (c<C>_runs_per_s), CPU time of the process tree per run
// (c<C>_cpu_ms_per_run: what a run costs a machine, for sizing one), and the speed-up over
// concurrency 1 (c<C>_speedup, each round's ratio, then the median); the load average before
// the first and after the last round (load_before/load_after): a scaling figure means little
// on a machine busy with other work. And the machine's busy cores meanwhile (c<C>_cores_busy:
// CPU time of everything on it ÷ wall time): concurrency 1 already keeps more than one core
// busy (the next warm helper starts while a run goes on; the kernel tears namespaces down in
// its own threads), so with the same CPU per run no concurrency can beat cores ÷
// c1_cores_busy times concurrency 1 (speedup_ceiling). `cold` (harness/scaling_cold_helper):
// the same with a helper started per launch (EVALBOX_WARM_HELPER=0), which keeps that work on
// the run's path at concurrency 1 instead of on the other core. The warm rounds also measure
// the machine's floors (floor_kind) at each concurrency right after evalbox's run at it:
// floor_<kind>_c<C>_per_s, _speedup (each round's ratio, then the median) and _cores_busy.
void bm_scaling(benchmark::State& state, int runs, int rounds, bool cold) {
  const std::vector<int> levels = {1, 2, 4};
  std::vector<fs::path> suites;
  for (int c : levels) {
    auto suite = write_suite(runs, c);
    if (!suite) return state.SkipWithError(suite.error().message.c_str());
    suites.push_back(*suite);
  }
  const std::vector<floor_kind> floors =
      cold ? std::vector<floor_kind>{}
           : std::vector<floor_kind>{{"spin", 2 * runs, spin_unit},
                                     {"spawn_true", 2 * runs, spawn_true_unit},
                                     {"unshare", runs, unshare_unit}};
  for (auto _ : state) {
    state.counters["load_before"] = load_average();
    std::vector<std::vector<double>> rate(levels.size()), cpu(levels.size()),
        speedup(levels.size()), cores(levels.size());
    // [floor][level]: units per second, speed-up over concurrency 1, busy cores.
    std::vector<std::vector<std::vector<double>>> floor_rate(
        floors.size(), std::vector<std::vector<double>>(levels.size())),
        floor_speedup = floor_rate, floor_cores = floor_rate;
    double total = 0;
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < levels.size(); ++i) {
        auto r = run_suite_once(suites[i], runs, cold);
        if (!r) return state.SkipWithError(r.error().message.c_str());
        total += r->secs;
        rate[i].push_back(runs / r->secs);
        cpu[i].push_back(r->cpu_secs * 1000.0 / runs);
        cores[i].push_back(r->machine_cpu_secs / r->secs);
        speedup[i].push_back(rate[i].back() / rate[0].back());
        for (size_t f = 0; f < floors.size(); ++f) {
          const floor_round fr = run_floor(floors[f], levels[i]);
          if (!fr.ok)
            return state.SkipWithError(fmt::format("floor {} failed", floors[f].name).c_str());
          floor_rate[f][i].push_back(fr.per_s);
          floor_cores[f][i].push_back(fr.cores_busy);
          floor_speedup[f][i].push_back(fr.per_s / floor_rate[f][0].back());
        }
      }
    }
    state.SetIterationTime(total);
    state.counters["load_after"] = load_average();
    for (size_t i = 0; i < levels.size(); ++i) {
      const std::string c = fmt::format("c{}_", levels[i]);
      state.counters[c + "runs_per_s"] = median(rate[i]);
      state.counters[c + "cpu_ms_per_run"] = median(cpu[i]);
      state.counters[c + "cores_busy"] = median(cores[i]);
      if (i > 0) state.counters[c + "speedup"] = median(speedup[i]);
    }
    for (size_t f = 0; f < floors.size(); ++f) {
      for (size_t i = 0; i < levels.size(); ++i) {
        const std::string c = fmt::format("floor_{}_c{}_", floors[f].name, levels[i]);
        state.counters[c + "per_s"] = median(floor_rate[f][i]);
        state.counters[c + "cores_busy"] = median(floor_cores[f][i]);
        if (i > 0) state.counters[c + "speedup"] = median(floor_speedup[f][i]);
      }
    }
    const double c1_cores = median(cores[0]);
    if (c1_cores > 0)
      state.counters["speedup_ceiling"] =
          static_cast<double>(std::thread::hardware_concurrency()) / c1_cores;
  }
}

// The warm helper against a helper started per launch (sandbox/launch/launcher.h): rounds of
// `evalbox run` at concurrency 1, warm then cold, medians of the rounds: runs/s and CPU ms per
// run each way (warm_…, cold_…), the warm run's speed-up over the cold one (each round's ratio,
// then the median), and the load average before and after.
void bm_helper_start(benchmark::State& state, int runs, int rounds) {
  auto suite = write_suite(runs, 1);
  if (!suite) return state.SkipWithError(suite.error().message.c_str());
  for (auto _ : state) {
    state.counters["load_before"] = load_average();
    std::vector<double> rate[2], cpu[2], speedup;
    double total = 0;
    for (int round = 0; round < rounds; ++round) {
      for (int cold = 0; cold < 2; ++cold) {
        auto r = run_suite_once(*suite, runs, cold == 1);
        if (!r) return state.SkipWithError(r.error().message.c_str());
        total += r->secs;
        rate[cold].push_back(runs / r->secs);
        cpu[cold].push_back(r->cpu_secs * 1000.0 / runs);
      }
      speedup.push_back(rate[0].back() / rate[1].back());
    }
    state.SetIterationTime(total);
    state.counters["load_after"] = load_average();
    state.counters["warm_runs_per_s"] = median(rate[0]);
    state.counters["cold_runs_per_s"] = median(rate[1]);
    state.counters["warm_cpu_ms_per_run"] = median(cpu[0]);
    state.counters["cold_cpu_ms_per_run"] = median(cpu[1]);
    state.counters["warm_speedup"] = median(speedup);
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
    auto a = launch_in(*session, agent);
    launch_options grade;
    grade.label = "grade";
    grade.argv = {"/bin/sh", "/grader/ok.sh"};
    grade.with_secrets = false;
    grade.extra_mounts = {
        {fx / "grader", "/grader", false, false},
        {env().dir() / "transcript.jsonl", "/evalbox/transcript.jsonl", false, true}};
    auto g = launch_in(*session, grade);
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
  const int rounds = std::getenv("EVALBOX_BENCH_SCALING_ROUNDS")
                         ? std::atoi(std::getenv("EVALBOX_BENCH_SCALING_ROUNDS"))
                         : 3;
  benchmark::RegisterBenchmark(
      fmt::format("harness/helper_start/runs:{}/rounds:{}", runs, rounds).c_str(),
      [runs, rounds](benchmark::State& st) { bm_helper_start(st, runs, rounds); })
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  for (bool cold : {false, true}) {
    benchmark::RegisterBenchmark(
        fmt::format("harness/scaling{}/runs:{}/rounds:{}", cold ? "_cold_helper" : "", runs, rounds)
            .c_str(),
        [runs, rounds, cold](benchmark::State& st) { bm_scaling(st, runs, rounds, cold); })
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
