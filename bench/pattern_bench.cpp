// Fixture patterns (RE2) on hostile agent-written text: the time a check takes on a 4 MiB file
// of "abab...", the input whose std::regex search overflowed the stack, and on the shapes that
// backtracking engines take exponential time on. tests/harness/config/pattern_test.cpp asserts
// the answers; this measures how long they take (docs/reliability.md has the figures).
#include <benchmark/benchmark.h>

#include <string>

#include "harness/config/pattern.h"

namespace {

const std::string& abab() {
  static const std::string text = [] {
    std::string s;
    s.reserve(4u << 20);
    for (size_t i = 0; i < (4u << 20); ++i) s += (i % 2) ? 'b' : 'a';
    return s + "c";
  }();
  return text;
}

void search(benchmark::State& state, const char* source) {
  auto p = evalbox::harness::pattern::compile(source);
  if (!p) {
    state.SkipWithError("does not compile");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(p->search(abab()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * abab().size()));
}

void compile(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(evalbox::harness::pattern::compile("^(a|b)*c$"));
}

}  // namespace

BENCHMARK_CAPTURE(search, alternation_star_found, "(a|b)*c")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(search, alternation_star_missing, "(a|b)*d")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(search, anchored_lines, "^(a|b)*c$")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(search, nested_plus, "(x+x+)+y")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(search, dot_star_repeated, "(.*){40}zzz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(search, dfa_blowup, "[a-q][^u-z]{13}x")->Unit(benchmark::kMillisecond);
BENCHMARK(compile)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
