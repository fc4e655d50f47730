// Fuzzes the reader of evalbox's own transcript.jsonl (grading's transcript checks and
// report.html read it from a results directory a user hands over).
#include "harness/transcripts/transcript.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  auto t = harness::from_jsonl(fuzz::as_text(data, size));
  if (!t) {
    fuzz::check(!t.error().message.empty(), "a rejected transcript says why");
    return 0;
  }
  // What was accepted is a transcript like any other: written again, it reads back the same.
  auto again = harness::from_jsonl(harness::to_jsonl(*t));
  fuzz::check(again.has_value() && *again == *t, "an accepted transcript round-trips");
  (void)harness::commands(*t);
  (void)harness::tools_used(*t);
  return 0;
}
