// Fuzzes the evalbox.events.v1 parser (what a `command` agent prints on stdout), in both of
// its modes: with and without a required "final" event.
#include "harness/transcripts/events.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view text = fuzz::as_text(data, size);
  auto strict = harness::parse_evalbox_events(text);
  auto lenient = harness::parse_evalbox_events(text, {.require_final = false});
  // Only a header naming another schema fails, and it fails the same way in both modes.
  fuzz::check(strict.has_value() == lenient.has_value(), "both modes agree on failure");
  if (!strict) return 0;
  fuzz::check(strict->steps == lenient->steps, "require_final changes no step");
  fuzz::check(strict->completed || strict->error.has_value(),
              "an incomplete stream is an error when final is required");
  fuzz::check_transcript(*strict);
  fuzz::check_transcript(*lenient);
  return 0;
}
