// Preparation benchmarks: prepare + teardown per workspace strategy and size, the managed home,
// and credential lease acquire/release; `cp -a` and `rm -rf` of the same trees as the floor.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <string>

#include "bench/bench_support.h"
#include "sandbox/creds/lease.h"
#include "sandbox/home/home.h"
#include "sandbox/workspace/workspace.h"

namespace evalbox::bench {
namespace {
namespace fs = std::filesystem;
using sandbox::workspace_strategy;

bench_env& env() {
  static bench_env e;
  return e;
}

// prepare() then close(): everything a run's filesystem side costs.
void bm_prepare(benchmark::State& state, workspace_strategy strategy,
                const workspace_shape* shape) {
  auto ws = ensure_workspace(*shape);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  for (auto _ : state) {
    auto session = env().preparer().prepare(env().request(*ws, strategy));
    if (!session) {
      // reflink on a filesystem without FICLONE lands here, with the reason.
      return state.SkipWithError(
          fmt::format("{}: {}", sandbox::workspace::to_string(strategy), session.error().message)
              .c_str());
    }
    if (auto closed = session->close(); !closed)
      return state.SkipWithError(closed.error().message.c_str());
  }
  state.counters["files"] = shape->files;
}

// The floor of a real copy: `cp -a` into a tmpfs, then `rm -rf` of it (the copy strategy
// copies into a size-limited tmpfs too).
void bm_cp_a_tmpfs(benchmark::State& state, const workspace_shape* shape) {
  auto ws = ensure_workspace(*shape);
  if (!ws) return state.SkipWithError(ws.error().message.c_str());
  const fs::path mnt = env().dir() / fmt::format("cp-{}", shape->name);
  tmpfs_mount tmpfs(mnt, 1ull << 30);
  if (!tmpfs.ok()) return state.SkipWithError("mount tmpfs failed (needs root)");
  const std::string dst = (mnt / "ws").string();
  for (auto _ : state) {
    auto cp = run_child({"/bin/cp", "-a", ws->string(), dst});
    auto rm = run_child({"/bin/rm", "-rf", dst});
    if (cp.status != 0 || rm.status != 0) return state.SkipWithError("cp -a or rm -rf failed");
  }
}

// The managed home alone: lay out directories and files, then remove them, on a tmpfs like
// the run's disk.
void bm_home(benchmark::State& state) {
  const auto req = env().request(env().dir(), workspace_strategy::overlay);
  tmpfs_mount tmpfs(env().dir() / "home-disk", 16ull << 20);
  if (!tmpfs.ok()) return state.SkipWithError("mount tmpfs failed (needs root)");
  const fs::path dir = env().dir() / "home-disk" / "home";
  for (auto _ : state) {
    if (auto s = sandbox::home::lay_out(dir, req.home, req.secrets, 60000, 60000); !s)
      return state.SkipWithError(s.error().message.c_str());
    (void)remove_tree(dir);
  }
}

void bm_lease(benchmark::State& state) {
  const fs::path leases = env().dir() / "leases";
  const auto secret = env().secret();
  for (auto _ : state) {
    auto lease = sandbox::creds::credential_lease::acquire(leases, secret, 60000, 60000);
    if (!lease) return state.SkipWithError(lease.error().message.c_str());
    lease->release();
  }
}

void bm_fork_exec_true(benchmark::State& state) {
  for (auto _ : state) run_child({"/bin/true"});
}

void register_all() {
  benchmark::RegisterBenchmark("floor/fork_exec_true", bm_fork_exec_true)->UseRealTime();
  for (const auto* shape : {&small_workspace, &medium_workspace, &large_workspace}) {
    for (auto s :
         {workspace_strategy::overlay, workspace_strategy::reflink, workspace_strategy::copy}) {
      benchmark::RegisterBenchmark(
          fmt::format("prepare/{}/{}", sandbox::workspace::to_string(s), shape->name).c_str(),
          [s, shape](benchmark::State& st) { bm_prepare(st, s, shape); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(fmt::format("floor/cp_a_rm_rf_tmpfs/{}", shape->name).c_str(),
                                 [shape](benchmark::State& st) { bm_cp_a_tmpfs(st, shape); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("home/lay_out_and_remove", bm_home)->UseRealTime();
  benchmark::RegisterBenchmark("lease/acquire_release", bm_lease)->UseRealTime();
}

}  // namespace
}  // namespace evalbox::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  evalbox::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
