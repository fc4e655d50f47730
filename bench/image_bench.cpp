// Importing an image, side by side with the tool people would otherwise use: evalbox's first
// import of the Debian test image (bookworm minbase + python3 + git: one gzip layer of about
// 100 MB, 275 MB unpacked; tests/images/make-images debian) against `umoci unpack` of the same
// OCI layout. Both read the same blobs (warm page cache), verify digests and write the tree
// onto the same filesystem; evalbox also syncs it (its store promises a finished layer is
// complete after a crash) — the "nosync" figure leaves that out to compare like for like.
//
// image/side_by_side alternates the two in every iteration (order swapped each time) and
// reports their mean seconds and the ratio evalbox / umoci: the number docs/performance.md
// records. Target: no slower (ratio <= 1).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "base/fs.h"
#include "bench/bench_support.h"
#include "sandbox/image/store.h"

namespace {

namespace fs = std::filesystem;
using namespace evalbox;

// The Debian image's gzip layout, built (or found cached) by tests/images/make-images.
const fs::path& debian_layout() {
  static const fs::path dir = [] {
    std::string cmd = std::string(EVALBOX_SOURCE_DIR) + "/tests/images/make-images debian";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    if (!p || ::pclose(p) != 0) return fs::path();
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return fs::path(out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1)) /
           "oci-gzip";
  }();
  return dir;
}

// Scratch space on the build's filesystem (where a state root would be), not tmpfs.
fs::path scratch(const std::string& name) {
  const char* cache = std::getenv("EVALBOX_BENCH_CACHE");
  fs::path base = cache && *cache ? fs::path(cache) : fs::path(EVALBOX_BENCH_CACHE_DEFAULT);
  return base / "image-scratch" / name;
}

double import_evalbox(const fs::path& state, bool durable, std::string& error) {
  (void)remove_tree(state);
  sandbox::image::store_options o;
  o.state_root = state;
  o.owner_uid = 60000;
  o.owner_gid = 60000;
  o.durable = durable;
  const auto t0 = std::chrono::steady_clock::now();
  auto s = sandbox::image::store::open(o);
  auto r =
      s ? s->import("oci:" + debian_layout().string() + ":latest", {}) : std::unexpected(s.error());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r) error = r.error().message;
  (void)remove_tree(state);
  return secs;
}

double unpack_umoci(const fs::path& bundle, std::string& error) {
  (void)remove_tree(bundle);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = bench::run_child({"/usr/bin/umoci", "unpack", "--image",
                             debian_layout().string() + ":latest", bundle.string()});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) error = "umoci unpack failed";
  (void)remove_tree(bundle);
  return secs;
}

bool ready(benchmark::State& state) {
  if (::geteuid() != 0) {
    state.SkipWithError("needs root (the store chowns to the sandbox id, umoci unpacks as root)");
    return false;
  }
  if (debian_layout().empty() || !fs::exists(debian_layout())) {
    state.SkipWithError("tests/images/make-images debian failed");
    return false;
  }
  if (!fs::exists("/usr/bin/umoci")) {
    state.SkipWithError("umoci is not installed (scripts/bootstrap)");
    return false;
  }
  return true;
}

void BM_SideBySide(benchmark::State& state) {
  if (!ready(state)) return;
  double evalbox_total = 0, umoci_total = 0;
  int n = 0;
  std::string error;
  for (auto _ : state) {
    double e = 0, u = 0;
    if (n % 2 == 0) {
      e = import_evalbox(scratch("state"), true, error);
      u = unpack_umoci(scratch("bundle"), error);
    } else {
      u = unpack_umoci(scratch("bundle"), error);
      e = import_evalbox(scratch("state"), true, error);
    }
    state.SetIterationTime(e + u);
    evalbox_total += e;
    umoci_total += u;
    ++n;
  }
  if (!error.empty()) state.SkipWithError(error.c_str());
  state.counters["evalbox_s"] = evalbox_total / n;
  state.counters["umoci_s"] = umoci_total / n;
  state.counters["ratio"] = evalbox_total / umoci_total;
}

void BM_Evalbox(benchmark::State& state, bool durable) {
  if (!ready(state)) return;
  std::string error;
  for (auto _ : state) state.SetIterationTime(import_evalbox(scratch("state"), durable, error));
  if (!error.empty()) state.SkipWithError(error.c_str());
}

void BM_Umoci(benchmark::State& state) {
  if (!ready(state)) return;
  std::string error;
  for (auto _ : state) state.SetIterationTime(unpack_umoci(scratch("bundle"), error));
  if (!error.empty()) state.SkipWithError(error.c_str());
}

BENCHMARK(BM_SideBySide)
    ->Name("image/side_by_side/debian")
    ->UseManualTime()
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Evalbox, durable, true)
    ->Name("image/import/evalbox/debian")
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Evalbox, nosync, false)
    ->Name("image/import/evalbox_nosync/debian")
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Umoci)
    ->Name("image/unpack/umoci/debian")
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
