// The full cycle: prepare → launch /bin/true in the complete sandbox (namespaces, mounts,
// Landlock, seccomp, cgroup, limits, lease, home) → teardown, with network none and with an
// allow-list; launches alone (agent and grading sandboxes); and the machine's floors measured
// in the same process: fork+exec /bin/true and `unshare -Urmpn --fork --mount-proc /bin/true`.
// Launches take the warm helper (sandbox/launch/launcher.h); the `…/cold_helper` twins of the
// medium cycle and the agent launch start a helper for each launch (EVALBOX_WARM_HELPER=0), and
// their `…/namespaces_at_launch` twins take a warm helper that did not make the run's user and
// network namespaces ahead (EVALBOX_NAMESPACES_AHEAD=0, sandbox/helper/ahead.h). The
// `…/against_<peer>` benchmarks alternate evalbox and a peer command in one process (the launch
// against bwrap with the agent layout, the medium cycle against `unshare -Urmpn`) and report the
// median ratio of the pairs: the figure that holds on a host whose speed drifts.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "bench/bench_support.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/sys/syscalls.h"

namespace evalbox::bench {
namespace {
namespace fs = std::filesystem;
using namespace evalbox::sandbox;

double cpu_seconds() {
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return secs(self.ru_utime) + secs(self.ru_stime) + secs(children.ru_utime) +
         secs(children.ru_stime);
}

// CPU time of this process and every child it waited for, per iteration: on a shared, loaded
// machine the wall time mostly measures the queue for the CPU; this is the work itself.
struct cpu_counter {
  benchmark::State& state;
  double start = cpu_seconds();
  ~cpu_counter() {
    if (state.iterations() > 0)
      state.counters["cpu_ms_tree"] =
          (cpu_seconds() - start) * 1000.0 / static_cast<double>(state.iterations());
  }
};

bench_env& env() {
  static bench_env e;
  return e;
}

network_policy allow_list() {
  network_policy n;
  n.mode = network_mode::allow;
  // A relayed loopback port and a name through the CONNECT proxy; /bin/true sends nothing.
  n.allow = {"127.0.0.1:9", "api.example.com:443"};
  return n;
}

// The helper path for one benchmark: warm (one is waiting before the first iteration, as it
// is for every later one, with the run's user and network namespaces made ahead), warm without
// the namespaces made ahead (EVALBOX_NAMESPACES_AHEAD=0: clone3 makes them at the launch, as on
// the cold path), or cold (sessions of the cold preparer: EVALBOX_WARM_HELPER=0's setting).
enum class helper_path { warm, warm_namespaces_at_launch, cold };

// The preparer whose sessions launch the way `path` says.
sandbox::preparer& preparer_for(helper_path path) {
  return path == helper_path::cold ? env().cold_preparer() : env().preparer();
}

const launch_settings& warm_settings() { return env().preparer().options().launch; }

// The waiting helper read EVALBOX_NAMESPACES_AHEAD when it started: replace it by one that
// reads the current setting.
void replace_waiting_helper() {
  if (const auto pid = wait_for_warm_helper(warm_settings(), std::chrono::seconds(5))) {
    evalbox::unique_fd fd(sys::pidfd_open(*pid, 0));
    ::kill(*pid, SIGKILL);
    pollfd p{fd.get(), POLLIN, 0};
    (void)::poll(&p, 1, 5000);
  }
  (void)wait_for_warm_helper(warm_settings(), std::chrono::seconds(5));
}

struct helper_start {
  explicit helper_start(helper_path path) : path_(path) {
    if (path_ == helper_path::cold) return;
    (void)wait_for_warm_helper(warm_settings(), std::chrono::seconds(5));
    if (path_ == helper_path::warm_namespaces_at_launch) {
      ::setenv("EVALBOX_NAMESPACES_AHEAD", "0", 1);
      replace_waiting_helper();
    }
  }
  ~helper_start() {
    if (path_ == helper_path::warm_namespaces_at_launch) {
      ::unsetenv("EVALBOX_NAMESPACES_AHEAD");
      replace_waiting_helper();
    }
  }
  helper_path path_;
};

status check(const result<run_record>& rec) {
  if (!rec) return std::unexpected(rec.error());
  if (!rec->ok()) return make_error(error_kind::io, "{}: {}", rec->error_step, rec->error);
  if (rec->outcome != outcome_kind::exited || rec->exit_code != 0)
    return make_error(error_kind::io, "/bin/true did not exit 0");
  return {};
}

void bm_cycle(benchmark::State& state, const workspace_shape* shape, bool allow,
              helper_path path = helper_path::warm) {
  auto ws = ensure_workspace(*shape);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  helper_start start(path);
  cpu_counter cpu{state};
  for (auto _ : state) {
    auto req = env().request(*ws, workspace_strategy::auto_select);
    if (allow) req.network = allow_list();
    auto session = preparer_for(path).prepare(req);
    if (!session) return state.SkipWithError(session.error().message.c_str());
    launch_options lo;
    lo.label = "agent";
    if (auto ok = check(launch_in(*session, lo)); !ok)
      return state.SkipWithError(ok.error().message.c_str());
    if (auto closed = session->close(); !closed)
      return state.SkipWithError(closed.error().message.c_str());
  }
}

// The same cycle with an image as the root (busybox: 2 layers, 2 MiB; Debian: 1 layer, 250
// MiB): what preparation adds for an image must not grow with its size.
void bm_cycle_image(benchmark::State& state, const std::string& image) {
  auto ws = ensure_workspace(small_workspace);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  auto img = env().image(image);
  if (!img) return state.SkipWithError(img.error().message.c_str());
  helper_start start(helper_path::warm);
  cpu_counter cpu{state};
  for (auto _ : state) {
    auto session = env().preparer().prepare(env().image_request(*ws, *img));
    if (!session) return state.SkipWithError(session.error().message.c_str());
    launch_options lo;
    lo.label = "agent";
    if (auto ok = check(launch_in(*session, lo)); !ok)
      return state.SkipWithError(ok.error().message.c_str());
    if (auto closed = session->close(); !closed)
      return state.SkipWithError(closed.error().message.c_str());
  }
  state.counters["image_mib"] = static_cast<double>(img->bytes) / (1 << 20);
}

// Launches alone in one prepared session: the agent sandbox, and the grading sandbox (no
// secrets, the grader directory and a transcript file as extra read-only mounts).
// `spaced`: 20 ms outside the timer between launches, as an agent's run gives the next warm
// helper time to start (back to back, it starts on the other CPU during the launch it follows).
void bm_launch(benchmark::State& state, bool grading, bool host_net = false,
               helper_path path = helper_path::warm, bool spaced = false) {
  // The launch does not depend on the workspace's size (it binds the prepared view).
  auto ws = ensure_workspace(small_workspace);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  auto session = preparer_for(path).prepare(env().request(*ws, workspace_strategy::auto_select));
  if (!session) return state.SkipWithError(session.error().message.c_str());
  const fs::path grader = env().dir() / "grader";
  (void)make_dirs(grader, 0755);
  (void)write_file(grader / "check.sh", "#!/bin/sh\nexit 0\n", 0755);
  (void)write_file(env().dir() / "transcript.jsonl", "{}\n", 0644);
  launch_options lo;
  lo.label = grading ? "grade" : "agent";
  if (host_net) {
    // Only to measure what the network namespace costs: the host network is never a default.
    network_policy n;
    n.mode = network_mode::host;
    n.unsafe_host_network = true;
    lo.network_override = n;
  }
  if (grading) {
    lo.with_secrets = false;
    lo.extra_mounts = {
        {grader, "/grader", false, false},
        {env().dir() / "transcript.jsonl", "/evalbox/transcript.jsonl", false, true}};
  }
  helper_start start(path);
  cpu_counter cpu{state};
  for (auto _ : state) {
    if (auto ok = check(launch_in(*session, lo)); !ok)
      return state.SkipWithError(ok.error().message.c_str());
    if (spaced) {
      state.PauseTiming();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      state.ResumeTiming();
    }
  }
  (void)session->close();
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// evalbox against a peer command in pairs: each iteration `ours` once, then `peer` once, each
// after the same 10 ms of idle time (the next warm helper starts in the first of them, as an
// agent's run gives it time to). On a shared host whose speed changes from one minute to the
// next, the ratio of neighbours holds where medians taken minutes apart do not. The
// iteration's time is ours; the counters are medians over the pairs: ours, the peer's
// (`peer_counter`) and the ratio.
void run_paired(benchmark::State& state, const std::function<status()>& ours,
                const std::vector<std::string>& peer, const char* peer_counter) {
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t) {
    return std::chrono::duration<double, std::milli>(clock::now() - t).count();
  };
  std::vector<double> a_ms, b_ms, ratios;
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto t0 = clock::now();
    if (auto ok = ours(); !ok) return state.SkipWithError(ok.error().message.c_str());
    const double a = ms_since(t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto t1 = clock::now();
    if (run_child(peer).status != 0)
      return state.SkipWithError(fmt::format("{} failed", fmt::join(peer, " ")).c_str());
    const double b = ms_since(t1);
    state.SetIterationTime(a / 1000);
    a_ms.push_back(a);
    b_ms.push_back(b);
    ratios.push_back(a / b);
  }
  state.counters["evalbox_ms"] = median_of(a_ms);
  state.counters[peer_counter] = median_of(b_ms);
  state.counters["ratio"] = median_of(ratios);
}

// The in-process launch against bwrap with the agent layout (scripts/bench-peers' command, the
// medium workspace bound at /workspace).
void bm_launch_against_bwrap(benchmark::State& state) {
  const char* bwrap = "/usr/bin/bwrap";
  if (::access(bwrap, X_OK) != 0)
    return state.SkipWithError("no /usr/bin/bwrap (scripts/bootstrap bubblewrap)");
  auto ws = ensure_workspace(medium_workspace);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  auto session = env().preparer().prepare(env().request(*ws, workspace_strategy::auto_select));
  if (!session) return state.SkipWithError(session.error().message.c_str());
  const fs::path creds = env().dir() / "bwrap-creds" / "auth.json";
  (void)make_dirs(creds.parent_path(), 0700);
  (void)write_file(creds, "{\"token\":\"bench-0123456789\"}\n", 0600);
  // scripts/bench-peers' bwrap-agent command, word for word.
  std::vector<std::string> peer = {bwrap};
  std::istringstream words(
      "--unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink "
      "usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --ro-bind /etc /etc "
      "--proc /proc --dev /dev --tmpfs /tmp --tmpfs /home/agent");
  for (std::string w; words >> w;) peer.push_back(w);
  peer.insert(peer.end(), {"--ro-bind", creds.string(), "/home/agent/.agent/auth.json", "--setenv",
                           "HOME", "/home/agent", "--chdir", "/workspace", "--bind", ws->string(),
                           "/workspace", "/bin/true"});
  launch_options lo;
  lo.label = "agent";
  run_paired(
      state, [&]() -> status { return check(launch_in(*session, lo)); }, peer, "bwrap_agent_ms");
  (void)session->close();
}

// The full cycle (medium workspace, network none) against `unshare -Urmpn --fork --mount-proc
// /bin/true`.
void bm_cycle_against_unshare(benchmark::State& state) {
  auto ws = ensure_workspace(medium_workspace);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  helper_start start(helper_path::warm);
  auto cycle = [&]() -> status {
    auto session = env().preparer().prepare(env().request(*ws, workspace_strategy::auto_select));
    if (!session) return std::unexpected(session.error());
    launch_options lo;
    lo.label = "agent";
    EB_TRY(check(launch_in(*session, lo)));
    return session->close();
  };
  run_paired(state, cycle, {"/usr/bin/unshare", "-Urmpn", "--fork", "--mount-proc", "/bin/true"},
             "unshare_ms");
}

void bm_fork_exec_true(benchmark::State& state) {
  cpu_counter cpu{state};
  for (auto _ : state) run_child({"/bin/true"});
}

void bm_unshare(benchmark::State& state) {
  cpu_counter cpu{state};
  for (auto _ : state) {
    auto r = run_child({"/usr/bin/unshare", "-Urmpn", "--fork", "--mount-proc", "/bin/true"});
    if (r.status != 0) return state.SkipWithError("unshare -Urmpn failed");
  }
}

void register_all() {
  auto ms = [](benchmark::internal::Benchmark* b) {
    b->UseRealTime()->Unit(benchmark::kMillisecond);
  };
  ms(benchmark::RegisterBenchmark("floor/fork_exec_true", bm_fork_exec_true));
  ms(benchmark::RegisterBenchmark("floor/unshare_Urmpn_true", bm_unshare));
  for (const auto* shape : {&small_workspace, &medium_workspace, &large_workspace}) {
    ms(benchmark::RegisterBenchmark(fmt::format("cycle/net_none/{}", shape->name).c_str(),
                                    [shape](benchmark::State& st) { bm_cycle(st, shape, false); }));
  }
  ms(benchmark::RegisterBenchmark(
      "cycle/net_none/medium/namespaces_at_launch", [](benchmark::State& st) {
        bm_cycle(st, &medium_workspace, false, helper_path::warm_namespaces_at_launch);
      }));
  ms(benchmark::RegisterBenchmark("cycle/net_none/medium/cold_helper", [](benchmark::State& st) {
    bm_cycle(st, &medium_workspace, false, helper_path::cold);
  }));
  for (const auto* shape : {&small_workspace, &medium_workspace}) {
    ms(benchmark::RegisterBenchmark(fmt::format("cycle/net_allow/{}", shape->name).c_str(),
                                    [shape](benchmark::State& st) { bm_cycle(st, shape, true); }));
  }
  for (const char* image : {"busybox", "debian"}) {
    ms(benchmark::RegisterBenchmark(fmt::format("cycle/image/{}", image).c_str(),
                                    [image](benchmark::State& st) { bm_cycle_image(st, image); }));
  }
  ms(benchmark::RegisterBenchmark("launch/agent",
                                  [](benchmark::State& st) { bm_launch(st, false); }));
  ms(benchmark::RegisterBenchmark("launch/agent/namespaces_at_launch", [](benchmark::State& st) {
    bm_launch(st, false, false, helper_path::warm_namespaces_at_launch);
  }));
  ms(benchmark::RegisterBenchmark("launch/agent/spaced", [](benchmark::State& st) {
    bm_launch(st, false, false, helper_path::warm, true);
  }));
  ms(benchmark::RegisterBenchmark(
      "launch/agent/spaced/namespaces_at_launch", [](benchmark::State& st) {
        bm_launch(st, false, false, helper_path::warm_namespaces_at_launch, true);
      }));
  ms(benchmark::RegisterBenchmark("launch/agent/spaced/cold_helper", [](benchmark::State& st) {
    bm_launch(st, false, false, helper_path::cold, true);
  }));
  ms(benchmark::RegisterBenchmark("launch/agent/cold_helper", [](benchmark::State& st) {
    bm_launch(st, false, false, helper_path::cold);
  }));
  benchmark::RegisterBenchmark("launch/agent/against_bwrap", bm_launch_against_bwrap)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cycle/net_none/medium/against_unshare", bm_cycle_against_unshare)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  ms(benchmark::RegisterBenchmark("launch/grading",
                                  [](benchmark::State& st) { bm_launch(st, true); }));
  ms(benchmark::RegisterBenchmark("launch/agent_without_net_namespace",
                                  [](benchmark::State& st) { bm_launch(st, false, true); }));
}

}  // namespace
}  // namespace evalbox::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The launcher finds the helper in the build tree unless told otherwise.
  ::setenv("EVALBOX_HELPER", EVALBOX_BENCH_HELPER, 0);
  // Each benchmark chooses the warm helper or a cold start itself (helper_start, preparer_for).
  ::unsetenv("EVALBOX_WARM_HELPER");
  evalbox::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
