// Reading model-API responses as they pass through the gateway: which API a request speaks, a
// bounded text/event-stream reader, and the token usage of each API's answers, streamed (SSE) or
// not. Pure: no I/O. Every byte read here comes from an upstream or a stub and may be hostile:
// nothing throws on it (wrong types, huge or negative numbers are ignored), and the SSE reader's
// memory stays bounded whatever it is fed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evalbox::harness::gateway {

enum class api_kind { anthropic_messages, openai_responses, openai_chat, gemini, unknown };

// "anthropic-messages", "openai-responses", "openai-chat", "gemini", "unknown".
std::string_view to_string(api_kind k) noexcept;

// The API of a request, from its method and origin-form target (path and query): POST
// .../messages (Anthropic), .../responses, .../chat/completions, .../models/M:generateContent or
// :streamGenerateContent (Gemini). Anything else, other methods included, is unknown.
api_kind api_of(std::string_view method, std::string_view target);

struct sse_event {
  std::string event;  // the "event:" field; empty when the event names none
  std::string data;   // its "data:" lines joined with '\n'
  friend bool operator==(const sse_event&, const sse_event&) = default;
};

// An incremental text/event-stream parser (WHATWG HTML, "Server-sent events": lines end in \n,
// \r\n or \r, also when a \r\n is split across two feeds; a leading BOM is skipped; "event:",
// "data:" and ":" comments; one space after the colon is removed; "id:", "retry:" and unknown
// fields are ignored; an event is dispatched at a blank line when it has a data line). Nothing
// is buffered but the event being read: an event whose data would exceed max_event bytes, or
// whose name exceeds max_event_name, is dropped (and counted) while its bytes pass by.
class sse_reader {
 public:
  static constexpr size_t max_event_name = 256;

  explicit sse_reader(size_t max_event = 8u << 20);
  // Appends to `out` every event that `bytes` completes.
  void feed(std::string_view bytes, std::vector<sse_event>& out);
  // End of stream: a pending line is read and a pending event with data is dispatched (where
  // WHATWG would drop it: a stream cut after its last data line still counts). The reader is
  // then as new, for another stream.
  void finish(std::vector<sse_event>& out);
  // Events dropped for their size.
  [[nodiscard]] size_t dropped() const noexcept { return dropped_; }
  // Bytes allocated for the event being read: at most max_event + max_event_name plus the
  // strings' small-buffer sizes, whatever was fed.
  [[nodiscard]] size_t buffered() const noexcept;

 private:
  enum class place : uint8_t { name, value_start, value };
  enum class field : uint8_t { data, event, ignored };

  void take(char c, std::vector<sse_event>& out);
  void begin_value();
  void append_value(std::string_view v);
  void end_line(std::vector<sse_event>& out);
  void dispatch(std::vector<sse_event>& out);

  size_t max_event_;
  size_t dropped_ = 0;
  std::string event_;       // the name of the event being read
  std::string data_;        // its data, lines joined with '\n'
  bool has_data_ = false;   // it has a data line (its data may still be empty)
  bool oversize_ = false;   // it is being dropped
  std::string name_;        // the field name of the line being read, at most a few bytes
  bool name_long_ = false;  // the field name is longer than any field read
  bool line_empty_ = true;  // no byte of the current line yet
  place place_ = place::name;
  field field_ = field::ignored;
  bool after_cr_ = false;  // the last byte was \r: a \n next ends no line
  size_t bom_seen_ = 0;    // bytes of a leading BOM matched so far
  bool bom_done_ = false;  // past the point where a BOM could be
};

struct call_usage {
  std::optional<uint64_t> input_tokens;         // every prompt token, cached ones included
  std::optional<uint64_t> cached_input_tokens;  // of which read from a cache
  std::optional<uint64_t> cache_write_tokens;   // Anthropic cache_creation_input_tokens
  std::optional<uint64_t> output_tokens;        // every generated token, reasoning included
  std::optional<uint64_t> reasoning_tokens;
  std::string model;                 // as the response names it, when it does
  std::optional<std::string> error;  // the API's error message, when it answered one
  [[nodiscard]] bool known() const;  // input or output tokens known
  friend bool operator==(const call_usage&, const call_usage&) = default;
};

// The usage of a whole (not streamed) JSON response body; for Gemini also the JSON array of
// chunks that streamGenerateContent answers without alt=sse. Unknown: the body's shape decides.
call_usage usage_of_body(api_kind api, std::string_view body);

namespace detail {

// What a response has said so far. The counts as Anthropic and Gemini name them are kept, latest
// value of each, because their totals are sums of them (usage.cpp).
struct usage_state {
  api_kind api = api_kind::unknown;  // for unknown, until an event's shape names one
  call_usage usage;
  bool completed = false;
  struct {
    std::optional<uint64_t> input, cache_read, cache_creation, output;
  } anthropic;
  struct {
    std::optional<uint64_t> prompt, tool_use_prompt, cached, candidates, thoughts;
  } gemini;
  bool saw_finish_reason = false;  // Chat Completions: a choice ended
  bool saw_usage = false;          // Chat Completions: the usage chunk came
};

}  // namespace detail

// The usage of a streamed response, event by event (events from sse_reader). For unknown, the
// first event whose shape names an API decides.
class stream_usage {
 public:
  explicit stream_usage(api_kind api);
  void add(const sse_event& e);
  [[nodiscard]] const call_usage& usage() const noexcept { return s_.usage; }
  // The API's end-of-response event was seen: message_stop; response.completed, .incomplete
  // or .failed; [DONE], or finish_reason and usage; a Gemini chunk with a finishReason (or a
  // blocked prompt).
  [[nodiscard]] bool completed() const noexcept { return s_.completed; }

 private:
  detail::usage_state s_;
};

}  // namespace evalbox::harness::gateway
