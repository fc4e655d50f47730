// Fuzzes the Gemini CLI `stream-json` parser: everything in it is written by the agent.
#include "adapters/gemini/transcript.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  auto t = adapters::gemini::parse_gemini_stream_json(fuzz::as_text(data, size));
  fuzz::check(t.has_value(), "parse_gemini_stream_json never fails on content");
  fuzz::check_transcript(*t);
  return 0;
}
