// Fuzzes the gateway's readers of whole response bodies (harness/gateway/usage.h) for every API
// kind, and the API of a request from its target: an upstream or a stub answers any bytes.
// Nothing throws or crashes; the counts reported are ones a response could hold; an error says
// something; reading the same body twice gives the same usage.
#include <string>

#include "harness/gateway/usage.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox::harness::gateway;
  using evalbox::fuzz::check;
  const std::string_view text = evalbox::fuzz::as_text(data, size);
  constexpr uint64_t most = 3 * (uint64_t{1} << 53);  // a sum of three counts at most
  for (api_kind api : {api_kind::anthropic_messages, api_kind::openai_responses,
                       api_kind::openai_chat, api_kind::gemini, api_kind::unknown}) {
    call_usage u = usage_of_body(api, text);
    for (const auto& n : {u.input_tokens, u.cached_input_tokens, u.cache_write_tokens,
                          u.output_tokens, u.reasoning_tokens}) {
      check(!n || *n <= most, "a count a response could hold");
    }
    check(!u.error || !u.error->empty(), "an error says something");
    check(u.known() == (u.input_tokens || u.output_tokens), "known()");
    check(usage_of_body(api, text) == u, "the same body reads the same");
  }
  // The body's bytes as a request target: any text is one API or unknown.
  api_kind k = api_of("POST", text);
  check(!to_string(k).empty(), "every API has a name");
  check(api_of("GET", text) == api_kind::unknown, "only POST is a model call");
  return 0;
}
