// The memory of writing reports is flat in the number of records: indexing results.jsonl and
// writing summary.json, report.md, report.html and junit.xml keep a small entry per run, never
// the records themselves (about 13 KB each once parsed) nor a whole report as one string.
//
// Measured without timing: this executable replaces the global operator new/delete to count
// the bytes allocated and live, and compares the peak while the reports of 200 and of 2,000
// runs are written. Its own executable, so the counting touches no other test.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "base/fs.h"
#include "base/json.h"
#include "harness/report/report.h"

namespace {

std::atomic<size_t> live_bytes{0};
std::atomic<size_t> peak_bytes{0};

void* counted_new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  size_t now = live_bytes.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
  size_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void counted_delete(void* p) noexcept {
  if (p == nullptr) return;
  live_bytes.fetch_sub(malloc_usable_size(p));
  std::free(p);
}

}  // namespace

void* operator new(size_t n) { return counted_new(n); }
void* operator new[](size_t n) { return counted_new(n); }
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, size_t) noexcept { counted_delete(p); }
void operator delete[](void* p, size_t) noexcept { counted_delete(p); }
// The nothrow forms too (std::stable_sort's buffer): libstdc++ routes them to the ones above,
// but under ASan its own nothrow new would allocate what the counted delete then frees.
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_delete(p); }

namespace evalbox::harness {
namespace {

// A record shaped like those of `evalbox run` (about 2 KB on its line): the sandbox's run
// record, two checks, usage and timings; one run in seven failed, one in fifty an error.
json record(size_t i) {
  const std::string id = fmt::format("{:016x}", 0x9e3779b97f4a7c15ull * (i + 1));
  const std::string candidate = i % 2 ? "tuned" : "baseline";
  const std::string fixture = fmt::format("fixture-{:02}", (i / 2) % 10);
  const int trial = static_cast<int>(i / 20);
  const bool error = i % 50 == 49, failed = !error && i % 7 == 3;
  json limits = json::object();
  for (const char* l : {"cpu_ms", "disk_bytes", "memory_bytes", "output_bytes", "pids", "wall_ms"})
    limits[l] = {{"by", {"cgroup v2", "RLIMIT"}}, {"value", 600000 + i}};
  json agent = {{"schema", "evalbox.run-record.v1"},
                {"binding_digest", std::string(64, 'b')},
                {"connections", json::array()},
                {"cpu_ms", i % 13},
                {"exit_code", 0},
                {"mechanisms",
                 {{"capabilities", "none"},
                  {"cgroup", "v2"},
                  {"landlock_abi", 7},
                  {"limits", limits},
                  {"network", "none"},
                  {"seccomp_digest", std::string(64, 's')}}},
                {"outcome", "exited"},
                {"peak_memory_bytes", 524288 + i},
                {"wall_ms", 3 + i % 5}};
  json checks = json::array();
  if (!error) {
    checks.push_back({{"id", "hidden-tests"},
                      {"kind", "shell"},
                      {"weight", 1.0},
                      {"passed", !failed},
                      {"detail", failed ? "1 test failed: expected 42, got 41" : ""}});
    checks.push_back(
        {{"id", "readme"}, {"kind", "file"}, {"weight", 1.0}, {"passed", true}, {"detail", ""}});
  }
  return {
      {"schema", "evalbox.run.v1"},
      {"run_id", id},
      {"suite", "memory"},
      {"attempts", 1},
      {"fixture", {{"id", fixture}, {"digest", std::string(64, 'f')}}},
      {"candidate", {{"id", candidate}, {"adapter", "command"}, {"digest", std::string(64, 'c')}}},
      {"trial", trial},
      {"execution",
       {{"status", error ? "error" : "completed"},
        {"error", error ? json("sandbox: overlay mount failed: EINVAL") : json(nullptr)},
        {"error_kind", error ? json("sandbox") : json(nullptr)},
        {"session", id + "-0-1a2b3c4d"},
        {"outcome", "exited"},
        {"exit_code", 0},
        {"records", {{"agent", agent}, {"setup", agent}}}}},
      {"grading",
       {{"status", error ? "skipped" : "completed"},
        {"checks", checks},
        {"score", failed ? 0.5 : 1.0},
        {"threshold", 1.0},
        {"error", nullptr}}},
      {"verdict", error    ? "not_assessed"
                  : failed ? "failed"
                           : "passed"},
      {"usage",
       {{"input_tokens", 1000 + i},
        {"output_tokens", 200 + i % 17},
        {"cached_input_tokens", nullptr},
        {"reasoning_tokens", nullptr},
        {"cost_usd", 0.001 * static_cast<double>(i % 9)},
        {"cost_source", "price_table"}}},
      {"timings",
       {{"started_at", "2026-01-01T00:00:00Z"},
        {"finished_at", "2026-01-01T00:00:01Z"},
        {"wall_ms", 400 + i % 100},
        {"agent_ms", 150},
        {"grading_ms", 120}}}};
}

// A results directory of `runs` runs, each with a small diff and transcript for report.html.
void make_results(const std::filesystem::path& dir, size_t runs) {
  std::string lines;
  for (size_t i = 0; i < runs; ++i) {
    json r = record(i);
    lines += canonical_json(r) + "\n";
    const auto run_dir = dir / "runs" / r["run_id"].get<std::string>();
    ASSERT_TRUE(make_dirs(run_dir));
    ASSERT_TRUE(write_file(
        run_dir / "workspace.diff",
        fmt::format("--- a/src/x.c\n+++ b/src/x.c\n-  return {};\n+  return {};\n", i, i + 1)));
    ASSERT_TRUE(
        write_file(run_dir / "transcript.jsonl",
                   "{\"type\":\"header\",\"agent\":\"command\"}\n"
                   "{\"type\":\"step\",\"index\":0,\"source\":\"agent\",\"message\":\"done\"}\n"));
  }
  ASSERT_TRUE(write_file(dir / "results.jsonl", lines));
}

struct measured {
  size_t peak = 0;   // above what was live before
  size_t reads = 0;  // records read back by the renderers
};

// The peak heap while results.jsonl of `runs` runs is indexed and every report written.
measured writing_reports(size_t runs) {
  evalbox::temp_dir dir;
  make_results(dir.path(), runs);
  measured m;
  const size_t before = live_bytes.load();
  peak_bytes.store(before);
  {
    auto index = run_index::of_results(results_dir(dir.path()));
    EXPECT_TRUE(index) << index.error().message;
    if (!index) return m;
    EXPECT_EQ(index->size(), runs);
    auto s = write_reports(dir.path(), *index, "memory", std::string("baseline"));
    EXPECT_TRUE(s) << s.error().message;
    m.reads = index->reads();
  }
  m.peak = peak_bytes.load() - before;
  for (const char* f : {"summary.json", "report.md", "report.html", "junit.xml"})
    EXPECT_TRUE(std::filesystem::exists(dir.path() / f)) << f;
  return m;
}

TEST(ReportMemory, PeakHeapGrowsByLessThanAKilobytePerRun) {
  const measured small = writing_reports(200);
  const measured large = writing_reports(2000);
  ASSERT_GT(small.peak, 0u);
  const double per_run =
      (static_cast<double>(large.peak) - static_cast<double>(small.peak)) / (2000.0 - 200.0);
  RecordProperty("peak_bytes_200", std::to_string(small.peak));
  RecordProperty("peak_bytes_2000", std::to_string(large.peak));
  std::printf("peak heap: %zu bytes at 200 runs, %zu at 2000: %.0f bytes per run\n", small.peak,
              large.peak, per_run);
  // Holding the parsed records alone would be ~13,000 bytes per run; the index entry, the
  // statistics' per-run data and the order of report.html's runs take a few hundred.
  EXPECT_LT(per_run, 1024.0);
  // Each run's record was read back by junit.xml and report.html, and the failed ones by
  // report.md: one record in memory at a time, never all of them.
  EXPECT_LT(large.reads, 3 * 2000u);
  EXPECT_GE(large.reads, 2 * 2000u);
}

}  // namespace
}  // namespace evalbox::harness
