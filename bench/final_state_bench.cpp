// What keeping a run's final state costs (harness/results/final_state.h; docs/results.md, "The
// final state"): the medium workspace (2,000 files, 20 MiB) with 20 files changed and 200 new
// 64 KiB files (12.5 MiB), kept
//   keep/overlay     from the paths an overlay's uppers list (what a run on overlay gives),
//   keep/every_path  from every path of both trees (what the copy strategy gives),
//   keep/again       the same state into a results directory that has its objects already
//                    (the second trial of a run that leaves the same files),
// against the baseline measured in the same process: cp_changed, a plain copy of the changed
// and new files (read, write, no hashing). scripts/bench reports the ratios.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/fs.h"
#include "base/json.h"
#include "bench/workspace_gen.h"
#include "harness/results/final_state.h"

namespace {

namespace fs = std::filesystem;
using namespace evalbox;

struct tree_pair {
  fs::path base, final_;
  std::vector<std::string> changed, every;
  temp_dir tmp{"evalbox-bench-state"};
  bool ok = false;
};

// The medium workspace as base, and a copy of it with 20 files appended to and 200 added.
bool build(tree_pair& p) {
  {
    auto ws = bench::ensure_workspace(bench::medium_workspace);
    if (!ws) return false;
    p.base = *ws;
    p.final_ = p.tmp.path() / "final";
    std::error_code ec;
    fs::copy(p.base, p.final_, fs::copy_options::recursive, ec);
    if (ec) return false;
    int n = 0;
    for (auto it = fs::recursive_directory_iterator(p.final_, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string rel = it->path().lexically_relative(p.final_).string();
      p.every.push_back(rel);
      if (it->is_regular_file() && n < 20) {
        if (!write_file(it->path(), std::string(4096, 'c'))) return false;
        p.changed.push_back(rel);
        ++n;
      }
    }
    if (!make_dirs(p.final_ / "new")) return false;
    for (int i = 0; i < 200; ++i) {
      std::string data(64u << 10, static_cast<char>('a' + i % 26));
      data += std::to_string(i);  // every file different
      const std::string rel = "new/f" + std::to_string(i);
      if (!write_file(p.final_ / rel, data)) return false;
      p.changed.push_back(rel);
      p.every.push_back(rel);
    }
    p.changed.push_back("new");
    p.every.push_back("new");
    return true;
  }
}

tree_pair& trees() {
  static tree_pair t;
  static const bool made = t.ok = build(t);
  (void)made;
  return t;
}

void keep(benchmark::State& state, bool every_path, bool again) {
  tree_pair& t = trees();
  if (!t.ok) {
    state.SkipWithError("the medium workspace could not be made");
    return;
  }
  const std::vector<std::string>& candidates = every_path ? t.every : t.changed;
  temp_dir results_root("evalbox-bench-results");
  int run = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path results =
        again ? results_root.path() : results_root.path() / std::to_string(run);
    const std::string id = "r" + std::to_string(run++);
    (void)make_dirs(results / "runs" / id);
    state.ResumeTiming();
    auto kept = harness::keep_final_state(
        results, id, {{"workspace", "/workspace", t.final_, t.base, candidates}}, 1ull << 30);
    if (!kept || (*kept)["path"].is_null()) {
      state.SkipWithError("nothing kept");
      return;
    }
    state.PauseTiming();
    if (!again) (void)remove_tree(results);
    state.ResumeTiming();
  }
}

// The baseline: the changed and new files copied as they are.
void cp_changed(benchmark::State& state) {
  tree_pair& t = trees();
  if (!t.ok) {
    state.SkipWithError("the medium workspace could not be made");
    return;
  }
  temp_dir out("evalbox-bench-cp");
  int run = 0;
  for (auto _ : state) {
    const fs::path to = out.path() / std::to_string(run++);
    for (const auto& rel : t.changed) {
      std::error_code ec;
      if (fs::is_directory(t.final_ / rel, ec)) continue;
      fs::create_directories((to / rel).parent_path(), ec);
      fs::copy_file(t.final_ / rel, to / rel, ec);
      if (ec) {
        state.SkipWithError("copy failed");
        return;
      }
    }
    state.PauseTiming();
    (void)remove_tree(to);
    state.ResumeTiming();
  }
}

}  // namespace

BENCHMARK(cp_changed)->Name("final_state/cp_changed")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(keep, overlay, false, false)
    ->Name("final_state/keep/overlay")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(keep, every_path, true, false)
    ->Name("final_state/keep/every_path")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(keep, again, false, true)
    ->Name("final_state/keep/again")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
