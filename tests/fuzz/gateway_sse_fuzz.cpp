// Fuzzes the gateway's text/event-stream reader and its per-API stream usage
// (harness/gateway/usage.h): an upstream or a stub sends any bytes, cut anywhere by the network.
// The bytes fed whole, in chunks cut at positions derived from them (after every \r among
// them), and one at a time give the same events and the same drop count; no event passes its
// bounds and the reader's memory stays within them; every API's stream usage reads the events
// without crashing, and the counts it reports are ones a response could hold.
#include <string>
#include <vector>

#include "harness/gateway/usage.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace evalbox::harness::gateway;

// Bytes that the strings of an empty event and a line's field name may hold beyond their data.
constexpr size_t slack = sse_reader::max_event_name + 64;

struct parsed {
  std::vector<sse_event> events;
  size_t dropped = 0;
};

// Feeds `text` to a reader in chunks ending before each position `cut` accepts.
template <class Cut>
parsed parse(std::string_view text, size_t max_event, Cut cut) {
  sse_reader r(max_event);
  parsed p;
  size_t start = 0;
  for (size_t i = 1; i <= text.size(); ++i) {
    if (i == text.size() || cut(i)) {
      r.feed(text.substr(start, i - start), p.events);
      evalbox::fuzz::check(r.buffered() <= max_event + slack, "the reader's memory is bounded");
      start = i;
    }
  }
  r.finish(p.events);
  p.dropped = r.dropped();
  return p;
}

void check_same(const parsed& a, const parsed& b, std::string_view how) {
  evalbox::fuzz::check(a.events == b.events, how);
  evalbox::fuzz::check(a.dropped == b.dropped, how);
}

void check_usage(const call_usage& u) {
  constexpr uint64_t most = 3 * (uint64_t{1} << 53);  // a sum of three counts at most
  for (const auto& n : {u.input_tokens, u.cached_input_tokens, u.cache_write_tokens,
                        u.output_tokens, u.reasoning_tokens}) {
    evalbox::fuzz::check(!n || *n <= most, "a count a response could hold");
  }
  evalbox::fuzz::check(!u.error || !u.error->empty(), "an error says something");
  evalbox::fuzz::check(u.known() == (u.input_tokens || u.output_tokens), "known()");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using evalbox::fuzz::check;
  const std::string_view text = evalbox::fuzz::as_text(data, size);

  for (size_t max_event : {size_t{8} << 20, size_t{64}}) {
    parsed whole = parse(text, max_event, [](size_t) { return false; });
    for (const sse_event& e : whole.events) {
      check(e.data.size() <= max_event, "an event's data is within max_event");
      check(e.event.size() <= sse_reader::max_event_name, "an event's name is bounded");
    }
    // Cuts derived from the bytes, and after every \r: a \r\n split across two feeds.
    parsed chunks = parse(text, max_event, [&](size_t i) {
      return text[i - 1] == '\r' || ((static_cast<uint8_t>(text[i]) ^ i) & 7) == 0;
    });
    check_same(whole, chunks, "chunked feeding gives the events of one feed");
    if (size <= 4096) {
      parsed bytes = parse(text, max_event, [](size_t) { return true; });
      check_same(whole, bytes, "byte-by-byte feeding gives the events of one feed");
    }
    for (api_kind api : {api_kind::anthropic_messages, api_kind::openai_responses,
                         api_kind::openai_chat, api_kind::gemini, api_kind::unknown}) {
      stream_usage s(api);
      for (const sse_event& e : whole.events) {
        s.add(e);
        check_usage(s.usage());
      }
      check(!to_string(api).empty(), "every API has a name");
    }
  }
  return 0;
}
