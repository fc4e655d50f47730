// Differential: the fast lexer of results.jsonl's lines (harness/results/fast_json.h) against
// nlohmann's, the reference. Whatever the input, a text the fast lexer accepts must be one
// nlohmann accepts, with the same SAX events (a number's type and bits included): every reader
// built on SAX events (the reports' fields, the merge's keys) then reads the same values.
#include "harness/results/fast_json.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/harness/results/sax_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  const std::string_view text = fuzz::as_text(data, size);
  const auto fast = testing::lex_fast(text);
  if (!fast.accepted) return 0;
  const auto reference = testing::lex_nlohmann(text);
  fuzz::check(reference.accepted, "the fast lexer accepted a text nlohmann refuses");
  fuzz::check(fast.events == reference.events, "the fast lexer's events differ from nlohmann's");
  return 0;
}
