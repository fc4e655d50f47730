// Resolving a registry image already pulled: store::import of a docker:// tag the store has,
// under --pull missing (the default), which every run naming a registry image pays. It answers
// from the store's records (store::from_store) without the network; the target is <= 5 ms.
//
// Setup, once per process: a local registry (tests/registry/registry-env: docker-registry on
// 127.0.0.1 with TLS, the test images pushed), test/busybox, test/derived and test/five pulled
// into a fresh store, then the registry stopped — so a resolution that asked the registry would
// fail, not merely be slow. Beside it, in the same process: the store's lookup of the image by
// its id (what a run's preparation asks once the image is resolved: one record read) and a
// plain stat(2) of that record. pull/side_by_side alternates the three in every iteration and
// reports their means and the ratios: the figures docs/performance.md records
// (scripts/bench-pull runs this after its own rounds).
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "base/fs.h"
#include "bench/bench_support.h"
#include "sandbox/image/registry.h"
#include "sandbox/image/store.h"

namespace {

namespace fs = std::filesystem;
using namespace evalbox;
using sandbox::image::pull_policy;

const std::string registry_env = std::string(EVALBOX_SOURCE_DIR) + "/tests/registry/registry-env";

// A value of DIR/env (registry-env writes NAME=VALUE lines, quoted only when needed).
std::string env_value(const fs::path& file, const std::string& name) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(name + "=")) return line.substr(name.size() + 1);
  return {};
}

bool run_ok(const std::vector<std::string>& argv) {
  auto r = bench::run_child(argv);
  return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
}

struct pulled_store {
  temp_dir tmp{"evalbox-pull-bench"};
  sandbox::image::registry_settings registry;
  std::optional<sandbox::image::store> store;
  std::string reference;  // docker://127.0.0.1:PORT/test/busybox:latest
  std::string id;         // its image id
  fs::path record;        // its record file
  std::string error;      // why there is none
};

// Stops the registry however setup ends.
struct registry_guard {
  fs::path dir;
  ~registry_guard() {
    if (!dir.empty()) (void)run_ok({registry_env, "stop", dir.string()});
  }
};

// Fills `s`, or says in s.error why it cannot.
void set_up(pulled_store& s) {
  if (::geteuid() != 0) {
    s.error = "needs root (the store chowns to the sandbox id)";
    return;
  }
  if (!fs::exists("/usr/bin/docker-registry") || !fs::exists("/usr/bin/skopeo")) {
    s.error = "docker-registry or skopeo is not installed (scripts/bootstrap --tests)";
    return;
  }
  const fs::path dir = s.tmp.path() / "registry";
  registry_guard guard;
  if (!run_ok({registry_env, "start", dir.string(), "--auth", "none"})) {
    s.error = "tests/registry/registry-env start failed";
    return;
  }
  guard.dir = dir;
  if (!run_ok({registry_env, "push", dir.string()})) {
    s.error = "tests/registry/registry-env push failed";
    return;
  }
  const std::string address = env_value(dir / "env", "REGISTRY");
  s.registry.ca_files = {env_value(dir / "env", "REGISTRY_CA")};
  sandbox::image::store_options o;
  o.state_root = s.tmp.path() / "state";
  o.owner_uid = 60000;
  o.owner_gid = 60000;
  auto st = sandbox::image::store::open(o);
  if (!st) {
    s.error = st.error().message;
    return;
  }
  s.store.emplace(std::move(*st));
  sandbox::image::import_options io;
  io.registry = &s.registry;
  for (const char* name : {"test/five:latest", "test/derived:latest", "test/busybox:latest"}) {
    auto r = s.store->import(fmt::format("docker://{}/{}", address, name), {}, io);
    if (!r) {
      s.error = r.error().message;
      return;
    }
    s.reference = r->reference;
    s.id = r->image.id;
  }
  s.record = s.store->root() / "records" / (s.id.substr(7) + ".json");
  // The guard stops the registry: from here on no answer can come from it.
}

pulled_store& pulled() {
  static pulled_store p;
  static const bool once = (set_up(p), true);
  (void)once;
  return p;
}

bool ready(benchmark::State& state) {
  if (!pulled().error.empty()) {
    state.SkipWithError(pulled().error.c_str());
    return false;
  }
  return true;
}

// The tag resolved as a run resolves it (--pull missing): from the store.
double resolve_tag(std::string& error) {
  auto& p = pulled();
  sandbox::image::import_options io;
  io.pull = pull_policy::missing;
  io.registry = &p.registry;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = p.store->import(p.reference, {}, io);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r)
    error = r.error().message;
  else if (r->pulled || r->image.id != p.id)
    error = "the tag was not answered from the store";
  return secs;
}

double lookup_id(std::string& error) {
  auto& p = pulled();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = p.store->lookup(p.id);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r) error = r.error().message;
  return secs;
}

double stat_record(std::string& error) {
  struct stat st {};
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = ::stat(pulled().record.c_str(), &st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) error = "stat of the image record failed";
  return secs;
}

void BM_SideBySide(benchmark::State& state) {
  if (!ready(state)) return;
  double tag = 0, id = 0, st = 0;
  int n = 0;
  std::string error;
  for (auto _ : state) {
    double a = 0, b = 0, c = 0;
    switch (n % 3) {  // rotated, so that no one of them always runs with the others' cache
      case 0:
        a = resolve_tag(error), b = lookup_id(error), c = stat_record(error);
        break;
      case 1:
        b = lookup_id(error), c = stat_record(error), a = resolve_tag(error);
        break;
      default:
        c = stat_record(error), a = resolve_tag(error), b = lookup_id(error);
        break;
    }
    state.SetIterationTime(a + b + c);
    tag += a, id += b, st += c;
    ++n;
  }
  if (!error.empty()) state.SkipWithError(error.c_str());
  state.counters["tag_missing_us"] = tag / n * 1e6;
  state.counters["lookup_id_us"] = id / n * 1e6;
  state.counters["stat_us"] = st / n * 1e6;
  state.counters["ratio_to_lookup"] = tag / id;
  state.counters["ratio_to_stat"] = tag / st;
  state.counters["target_ms"] = 5;
}

template <double (*Fn)(std::string&)>
void BM_One(benchmark::State& state) {
  if (!ready(state)) return;
  std::string error;
  for (auto _ : state) state.SetIterationTime(Fn(error));
  if (!error.empty()) state.SkipWithError(error.c_str());
}

BENCHMARK(BM_SideBySide)
    ->Name("pull/side_by_side/tag_missing")
    ->UseManualTime()
    ->MinTime(1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_One<resolve_tag>)
    ->Name("pull/tag_missing")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_One<lookup_id>)
    ->Name("pull/lookup_id")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_One<stat_record>)
    ->Name("pull/stat_record")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
