// Helpers shared by the fuzz targets (see fuzz_support.h).
#include "tests/fuzz/fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/fs.h"

namespace evalbox::fuzz {

void check(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "evalbox fuzz: invariant broken: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

void check_transcript(const harness::transcript& t) {
  std::string text = harness::to_jsonl(t);
  auto back = harness::from_jsonl(text);
  if (!back) {
    std::fprintf(stderr, "evalbox fuzz: %s\n", back.error().message.c_str());
    check(false, "a transcript evalbox wrote does not read back");
  }
  check(*back == t, "a transcript read back differs from the one written");
  // The grading queries (transcript checks) over the parsed transcript.
  (void)harness::commands(t);
  (void)harness::tools_used(t);
  check(harness::step_count(t) <= static_cast<int>(t.steps.size()), "step_count");
  for (size_t i = 0; i < t.steps.size(); ++i) {
    check(t.steps[i].index == static_cast<int>(i), "step indexes are 0..n-1");
  }
}

const std::filesystem::path& scratch_dir() {
  static const temp_dir dir("evalbox-fuzz");
  return dir.path();
}

}  // namespace evalbox::fuzz
