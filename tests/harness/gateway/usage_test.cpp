// The gateway's readers of model-API responses: the API of a request, the bounded SSE reader, and
// the usage of each API's answers, streamed and not, from the shapes the APIs really send
// (their documented examples and tests/agents/stub_model.py's streams) and from hostile ones.
#include "harness/gateway/usage.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace evalbox::harness::gateway {
namespace {

std::vector<sse_event> events_of(std::string_view text, size_t max_event = 8u << 20) {
  sse_reader r(max_event);
  std::vector<sse_event> out;
  r.feed(text, out);
  r.finish(out);
  return out;
}

std::vector<sse_event> events_byte_by_byte(std::string_view text) {
  sse_reader r;
  std::vector<sse_event> out;
  for (char c : text) r.feed(std::string_view(&c, 1), out);
  r.finish(out);
  return out;
}

stream_usage stream_of(api_kind api, std::string_view text) {
  stream_usage s(api);
  for (const sse_event& e : events_of(text)) s.add(e);
  return s;
}

// ---- api_of ------------------------------------------------------------------------------------

TEST(ApiOf, RealClientPaths) {
  EXPECT_EQ(api_of("POST", "/v1/messages?beta=true"), api_kind::anthropic_messages);
  EXPECT_EQ(api_of("POST", "/v1/messages"), api_kind::anthropic_messages);
  EXPECT_EQ(api_of("POST", "/v1/responses"), api_kind::openai_responses);
  EXPECT_EQ(api_of("POST", "/openai/v1/chat/completions"), api_kind::openai_chat);
  EXPECT_EQ(api_of("POST", "/v1/chat/completions/"), api_kind::openai_chat);
  EXPECT_EQ(api_of("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
            api_kind::gemini);
  EXPECT_EQ(api_of("POST", "/v1beta/models/gemini-2.5-flash:generateContent"), api_kind::gemini);
  EXPECT_EQ(api_of("POST",
                   "/v1/projects/p/locations/us-central1/publishers/google/models/"
                   "gemini-2.5-pro:streamGenerateContent?alt=sse"),
            api_kind::gemini);
}

TEST(ApiOf, OtherPathsAndMethodsAreUnknown) {
  EXPECT_EQ(api_of("GET", "/v1/messages"), api_kind::unknown);
  EXPECT_EQ(api_of("post", "/v1/responses"), api_kind::unknown);
  EXPECT_EQ(api_of("POST", "/v1/messages/count_tokens"), api_kind::unknown);
  EXPECT_EQ(api_of("POST", "/v1beta/models/gemini-2.5-pro:countTokens"), api_kind::unknown);
  EXPECT_EQ(api_of("POST", "/v1beta/models/:generateContent"), api_kind::unknown);
  EXPECT_EQ(api_of("GET", "/v1/models"), api_kind::unknown);
  EXPECT_EQ(api_of("POST", "/v1/completions"), api_kind::unknown);
  EXPECT_EQ(api_of("POST", "/x?next=/v1/messages"), api_kind::unknown);  // the query is no path
  EXPECT_EQ(api_of("POST", ""), api_kind::unknown);
}

TEST(ApiOf, Names) {
  EXPECT_EQ(to_string(api_kind::anthropic_messages), "anthropic-messages");
  EXPECT_EQ(to_string(api_kind::openai_responses), "openai-responses");
  EXPECT_EQ(to_string(api_kind::openai_chat), "openai-chat");
  EXPECT_EQ(to_string(api_kind::gemini), "gemini");
  EXPECT_EQ(to_string(api_kind::unknown), "unknown");
}

// ---- sse_reader --------------------------------------------------------------------------------

TEST(SseReader, EventsEndAtABlankLine) {
  auto e = events_of("event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\n");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0], (sse_event{"message_start", "{\"a\":1}"}));
  EXPECT_EQ(e[1], (sse_event{"ping", "{}"}));
}

TEST(SseReader, CrLfAndCrEndLines) {
  std::vector<sse_event> want{{"a", "1"}, {"", "2"}};
  EXPECT_EQ(events_of("event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n"), want);
  EXPECT_EQ(events_of("event: a\rdata: 1\r\rdata: 2\r\r"), want);
  EXPECT_EQ(events_of("event: a\r\ndata: 1\n\rdata: 2\r\n\n"), want);
}

TEST(SseReader, CrLfSplitAcrossFeedsIsOneLineEnd) {
  sse_reader r;
  std::vector<sse_event> out;
  r.feed("data: a\r", out);
  r.feed("\ndata: b\r", out);
  r.feed("\n\r", out);
  EXPECT_EQ(out, (std::vector<sse_event>{{"", "a\nb"}}));
  r.feed("\n", out);  // the \n of the blank line's \r\n: no second blank line
  r.feed("data: c\r\n\r\n", out);
  EXPECT_EQ(out, (std::vector<sse_event>{{"", "a\nb"}, {"", "c"}}));
}

TEST(SseReader, CommentsMultiLineDataAndTheOneSpace) {
  auto e = events_of(
      ": keep-alive\n:\ndata: first\ndata:second\ndata\ndata:  two spaces\nid: 7\nretry: 10\n"
      "unknown: x\neventual: y\n\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].event, "");
  EXPECT_EQ(e[0].data, "first\nsecond\n\n two spaces");
}

TEST(SseReader, AnEventWithoutDataIsNotDispatched) {
  auto e = events_of("event: ping\n\n: comment\n\nevent: x\nid: 3\n\ndata: y\n\n");
  // Nor does its name carry over to the next event.
  EXPECT_EQ(e, (std::vector<sse_event>{{"", "y"}}));
  // An empty data line is data.
  EXPECT_EQ(events_of("event: e\ndata:\n\n"), (std::vector<sse_event>{{"e", ""}}));
  // A second event: line replaces the first.
  EXPECT_EQ(events_of("event: a\nevent: b\ndata: 1\n\n"), (std::vector<sse_event>{{"b", "1"}}));
}

TEST(SseReader, FinishDispatchesThePendingEvent) {
  EXPECT_EQ(events_of("data: [DONE]"), (std::vector<sse_event>{{"", "[DONE]"}}));
  EXPECT_EQ(events_of("event: e\ndata: a\n"), (std::vector<sse_event>{{"e", "a"}}));
  EXPECT_EQ(events_of("event: e\n"), std::vector<sse_event>{});
  // The reader is then as new.
  sse_reader r;
  std::vector<sse_event> out;
  r.feed("event: e\ndata: a\r", out);
  r.finish(out);
  r.feed("\ndata: b\n\n", out);  // a new stream: its first \n is a blank line, not a \r\n's
  EXPECT_EQ(out, (std::vector<sse_event>{{"e", "a"}, {"", "b"}}));
}

TEST(SseReader, ALeadingBomIsSkipped) {
  EXPECT_EQ(events_of("\xEF\xBB\xBF"
                      "data: x\n\n"),
            (std::vector<sse_event>{{"", "x"}}));
  EXPECT_EQ(events_byte_by_byte("\xEF\xBB\xBF"
                                "data: x\n\n"),
            (std::vector<sse_event>{{"", "x"}}));
  // Only at the start, and only a whole one.
  EXPECT_EQ(events_of("\xEF\xBB"
                      "data: x\n\n"),
            std::vector<sse_event>{});
  EXPECT_EQ(events_of("data: \xEF\xBB\xBF\n\n"), (std::vector<sse_event>{{"", "\xEF\xBB\xBF"}}));
}

const std::string anthropic_stream =
    "event: message_start\n"
    R"(data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":1024,"cache_read_input_tokens":20480,"cache_creation":{"ephemeral_5m_input_tokens":1024,"ephemeral_1h_input_tokens":0},"output_tokens":2,"service_tier":"standard"}}})"
    "\n\n"
    "event: content_block_start\n"
    R"(data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})"
    "\n\n"
    "event: ping\n"
    R"(data: {"type": "ping"})"
    "\n\n"
    "event: content_block_delta\n"
    R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants the files listed."}})"
    "\n\n"
    "event: content_block_stop\n"
    R"(data: {"type":"content_block_stop","index":0})"
    "\n\n"
    "event: content_block_start\n"
    R"(data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"Bash","input":{}}})"
    "\n\n"
    "event: content_block_delta\n"
    R"(data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls -la\"}"}})"
    "\n\n"
    "event: content_block_stop\n"
    R"(data: {"type":"content_block_stop","index":1})"
    "\n\n"
    "event: message_delta\n"
    R"(data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":472,"cache_creation_input_tokens":1024,"cache_read_input_tokens":20480,"output_tokens":89}})"
    "\n\n"
    "event: message_stop\n"
    R"(data: {"type":"message_stop"})"
    "\n\n";

TEST(SseReader, ByteByByteGivesTheSameEventsAsWhole) {
  std::string mixed = anthropic_stream + ": comment\r\ndata: a\rdata: b\r\n\r\nevent: x\r\r" +
                      "\xEF\xBB\xBF" + "data\n\ndata: tail";
  auto whole = events_of(mixed);
  EXPECT_EQ(whole.size(), 12u);
  EXPECT_EQ(events_byte_by_byte(mixed), whole);
  EXPECT_EQ(events_byte_by_byte("\xEF\xBB\xBF" + mixed), whole);
}

TEST(SseReader, AnOversizeEventIsDroppedAndCounted) {
  sse_reader r(16);
  std::vector<sse_event> out;
  r.feed("data: 0123456789abcdef\n\n", out);  // exactly 16 bytes: kept
  r.feed("data: 0123456789abcdefX\n\n", out);
  r.feed("data: 01234567\ndata: 01234567\n\n", out);  // 8 + \n + 8 = 17
  r.feed("event: e\ndata: ok\n\n", out);
  EXPECT_EQ(out, (std::vector<sse_event>{{"", "0123456789abcdef"}, {"e", "ok"}}));
  EXPECT_EQ(r.dropped(), 2u);
  // A name longer than any event's is dropped too.
  out.clear();
  r.feed("event: " + std::string(sse_reader::max_event_name + 1, 'n') + "\ndata: x\n\n", out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.dropped(), 3u);
  // An oversize event cut by the end of the stream is counted too.
  r.feed("data: 0123456789abcdefX", out);
  r.finish(out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.dropped(), 4u);
}

TEST(SseReader, MemoryStaysBoundedWithoutANewline) {
  constexpr size_t max_event = 8u << 20;
  constexpr size_t slack = sse_reader::max_event_name + 1024;
  const std::string chunk(1u << 20, 'x');
  for (std::string_view start : {"data: ", "", ": ", "event: "}) {
    sse_reader r(max_event);
    std::vector<sse_event> out;
    r.feed(start, out);
    for (int i = 0; i < 50; ++i) {  // 50 MiB
      r.feed(chunk, out);
      ASSERT_LE(r.buffered(), max_event + slack) << "start '" << start << "', MiB " << i;
    }
    r.feed("\n\ndata: after\n\n", out);
    EXPECT_EQ(out, (std::vector<sse_event>{{"", "after"}})) << start;
    EXPECT_EQ(r.dropped(), start == "data: " ? 1u : 0u) << start;
    EXPECT_LE(r.buffered(), max_event + slack);
  }
  // Data that fills the limit exactly, in two lines: kept, and no more memory than it.
  sse_reader r(max_event);
  std::vector<sse_event> out;
  r.feed("data: ", out);
  r.feed(std::string(max_event - 1, 'y'), out);
  EXPECT_LE(r.buffered(), max_event + slack);
  r.feed("\ndata:", out);  // the joining \n is the last byte the event may hold
  EXPECT_LE(r.buffered(), max_event + slack);
  r.feed("\n\n", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, std::string(max_event - 1, 'y') + "\n");
  // Then more lines that pass it.
  out.clear();
  r.feed("data: ", out);
  r.feed(std::string(max_event - 1, 'y'), out);
  for (int i = 0; i < 10; ++i) {
    r.feed("\ndata: ", out);
    ASSERT_LE(r.buffered(), max_event + slack);
    r.feed(chunk, out);
    ASSERT_LE(r.buffered(), max_event + slack);
  }
  r.feed("\n\n", out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.dropped(), 1u);
}

// ---- Anthropic Messages ------------------------------------------------------------------------

TEST(AnthropicUsage, StreamCountsTheCacheAsInput) {
  auto s = stream_of(api_kind::anthropic_messages, anthropic_stream);
  EXPECT_TRUE(s.completed());
  const call_usage& u = s.usage();
  EXPECT_EQ(u.input_tokens, 472u + 1024u + 20480u);
  EXPECT_EQ(u.cached_input_tokens, 20480u);
  EXPECT_EQ(u.cache_write_tokens, 1024u);
  EXPECT_EQ(u.output_tokens, 89u);
  EXPECT_EQ(u.reasoning_tokens, std::nullopt);  // Anthropic does not count thinking apart
  EXPECT_EQ(u.model, "claude-sonnet-4-5-20250929");
  EXPECT_EQ(u.error, std::nullopt);
  EXPECT_TRUE(u.known());
}

// As tests/agents/stub_model.py sends it (Python's json.dumps spacing): message_delta has only
// the cumulative output_tokens, and the input side stays message_start's.
const std::string stub_anthropic_stream =
    "event: message_start\n"
    R"(data: {"type": "message_start", "message": {"id": "msg_stub000002", "type": "message", "role": "assistant", "model": "claude-opus-4-8", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})"
    "\n\n"
    "event: content_block_start\n"
    R"(data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})"
    "\n\n"
    "event: content_block_delta\n"
    R"(data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Done."}})"
    "\n\n"
    "event: content_block_stop\n"
    R"(data: {"type": "content_block_stop", "index": 0})"
    "\n\n"
    "event: message_delta\n"
    R"(data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}})"
    "\n\n"
    "event: message_stop\n"
    R"(data: {"type": "message_stop"})"
    "\n\n";

TEST(AnthropicUsage, StubStreamTakesTheLatestOutput) {
  stream_usage s(api_kind::anthropic_messages);
  auto events = events_of(stub_anthropic_stream);
  ASSERT_EQ(events.size(), 6u);
  s.add(events[0]);
  EXPECT_EQ(s.usage().input_tokens, 10u);
  EXPECT_EQ(s.usage().output_tokens, 1u);  // message_start's placeholder
  EXPECT_FALSE(s.completed());
  for (size_t i = 1; i < events.size(); ++i) s.add(events[i]);
  EXPECT_EQ(s.usage().input_tokens, 10u);
  EXPECT_EQ(s.usage().cached_input_tokens, 0u);
  EXPECT_EQ(s.usage().cache_write_tokens, 0u);
  EXPECT_EQ(s.usage().output_tokens, 5u);
  EXPECT_EQ(s.usage().model, "claude-opus-4-8");
  EXPECT_TRUE(s.completed());
}

TEST(AnthropicUsage, StreamCutBeforeMessageStopIsNotCompleted) {
  auto cut = stub_anthropic_stream.substr(0, stub_anthropic_stream.find("event: message_delta"));
  auto s = stream_of(api_kind::anthropic_messages, cut);
  EXPECT_FALSE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 10u);
  EXPECT_EQ(s.usage().output_tokens, 1u);
}

TEST(AnthropicUsage, Body) {
  auto u = usage_of_body(
      api_kind::anthropic_messages,
      R"({"id":"msg_01","type":"message","role":"assistant","model":"claude-opus-4-1-20250805",)"
      R"("content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,)"
      R"("usage":{"input_tokens":12,"cache_creation_input_tokens":3000,"cache_read_input_tokens":)"
      R"(40000,"output_tokens":345,"service_tier":"standard"}})");
  EXPECT_EQ(u.input_tokens, 43012u);
  EXPECT_EQ(u.cached_input_tokens, 40000u);
  EXPECT_EQ(u.cache_write_tokens, 3000u);
  EXPECT_EQ(u.output_tokens, 345u);
  EXPECT_EQ(u.model, "claude-opus-4-1-20250805");
  EXPECT_EQ(u.error, std::nullopt);
}

TEST(AnthropicUsage, Errors) {
  // The stub's scripted failure, and the API's overload error.
  auto u = usage_of_body(
      api_kind::anthropic_messages,
      R"({"type": "error", "error": {"type": "api_error", "message": "stub: scripted failure"}})");
  EXPECT_EQ(u.error, "stub: scripted failure");
  EXPECT_FALSE(u.known());
  auto s = stream_of(api_kind::anthropic_messages,
                     stub_anthropic_stream.substr(0, stub_anthropic_stream.find("event: content")) +
                         "event: error\n"
                         R"(data: {"type": "error", "error": {"type": "overloaded_error", )"
                         R"("message": "Overloaded"}})"
                         "\n\n");
  EXPECT_EQ(s.usage().error, "Overloaded");
  EXPECT_EQ(s.usage().input_tokens, 10u);
  EXPECT_FALSE(s.completed());
  // No message: the type says what.
  EXPECT_EQ(usage_of_body(api_kind::anthropic_messages,
                          R"({"type":"error","error":{"type":"overloaded_error"}})")
                .error,
            "overloaded_error");
}

// ---- OpenAI Responses --------------------------------------------------------------------------

const std::string responses_stream =
    "event: response.created\n"
    R"(data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","object":"response","created_at":1756315696,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"model":"gpt-5-2025-08-07","output":[],"parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":null},"store":true,"usage":null}})"
    "\n\n"
    "event: response.in_progress\n"
    R"(data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","object":"response","status":"in_progress","model":"gpt-5-2025-08-07","output":[],"usage":null}})"
    "\n\n"
    "event: response.output_item.added\n"
    R"(data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b","type":"reasoning","summary":[]}})"
    "\n\n"
    "event: response.output_text.delta\n"
    R"(data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_68af40337e58819392e935fb404414d005438e46b5f69a3b","output_index":1,"content_index":0,"delta":"Created","logprobs":[],"obfuscation":"9VsLi0zQF"})"
    "\n\n"
    "event: response.completed\n"
    R"(data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b","object":"response","created_at":1756315696,"status":"completed","error":null,"model":"gpt-5-2025-08-07","output":[{"id":"msg_68af40337e58819392e935fb404414d005438e46b5f69a3b","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Created result.txt."}],"role":"assistant"}],"usage":{"input_tokens":5234,"input_tokens_details":{"cached_tokens":4096},"output_tokens":812,"output_tokens_details":{"reasoning_tokens":640},"total_tokens":6046}}})"
    "\n\n";

TEST(ResponsesUsage, Stream) {
  stream_usage s(api_kind::openai_responses);
  auto events = events_of(responses_stream);
  ASSERT_EQ(events.size(), 5u);
  s.add(events[0]);
  EXPECT_EQ(s.usage().model, "gpt-5-2025-08-07");
  EXPECT_FALSE(s.usage().known());
  for (size_t i = 1; i < events.size(); ++i) s.add(events[i]);
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 5234u);
  EXPECT_EQ(s.usage().cached_input_tokens, 4096u);
  EXPECT_EQ(s.usage().output_tokens, 812u);
  EXPECT_EQ(s.usage().reasoning_tokens, 640u);
  EXPECT_EQ(s.usage().cache_write_tokens, std::nullopt);
  EXPECT_EQ(s.usage().error, std::nullopt);
}

TEST(ResponsesUsage, IncompleteAndFailedEndTheResponse) {
  auto s = stream_of(
      api_kind::openai_responses,
      "event: response.incomplete\n"
      R"(data: {"type":"response.incomplete","response":{"object":"response","status":"incomplete",)"
      R"("incomplete_details":{"reason":"max_output_tokens"},"model":"gpt-5","usage":)"
      R"({"input_tokens":100,"output_tokens":4096,"output_tokens_details":{"reasoning_tokens":4096}}}})"
      "\n\n");
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().output_tokens, 4096u);
  EXPECT_EQ(s.usage().error, std::nullopt);

  auto f = stream_of(
      api_kind::openai_responses,
      "event: response.created\n"
      R"(data: {"type":"response.created","response":{"object":"response","status":"in_progress","model":"gpt-5","usage":null}})"
      "\n\n"
      "event: response.failed\n"
      R"(data: {"type":"response.failed","sequence_number":4,"response":{"id":"resp_1","object":"response",)"
      R"("status":"failed","error":{"code":"server_error","message":"The server had an error )"
      R"(while processing your request."},"model":"gpt-5","usage":null}})"
      "\n\n");
  EXPECT_TRUE(f.completed());
  EXPECT_EQ(f.usage().error, "The server had an error while processing your request.");
  EXPECT_FALSE(f.usage().known());
}

TEST(ResponsesUsage, ErrorEvent) {
  auto s = stream_of(api_kind::openai_responses,
                     "event: error\n"
                     R"(data: {"type":"error","sequence_number":3,"code":"rate_limit_exceeded",)"
                     R"("message":"Rate limit reached for gpt-5","param":null})"
                     "\n\n");
  EXPECT_EQ(s.usage().error, "Rate limit reached for gpt-5");
  EXPECT_FALSE(s.completed());
  auto c = stream_of(api_kind::openai_responses,
                     "event: error\n"
                     R"(data: {"type":"error","code":"context_length_exceeded","message":""})"
                     "\n\n");
  EXPECT_EQ(c.usage().error, "context_length_exceeded");
}

TEST(ResponsesUsage, StubStream) {
  // tests/agents/stub_model.py's response.completed.
  auto s = stream_of(
      api_kind::openai_responses,
      "event: response.completed\n"
      R"(data: {"type": "response.completed", "response": {"id": "resp_0001", "object": "response", )"
      R"("status": "completed", "model": "gpt-5.5", "output": [], "usage": {"input_tokens": 10, )"
      R"("input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, )"
      R"("output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}})"
      "\n\n");
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 10u);
  EXPECT_EQ(s.usage().output_tokens, 5u);
  EXPECT_EQ(s.usage().reasoning_tokens, 0u);
  EXPECT_EQ(s.usage().model, "gpt-5.5");
}

TEST(ResponsesUsage, Body) {
  auto u = usage_of_body(
      api_kind::openai_responses,
      R"({"id":"resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41","object":"response",)"
      R"("created_at":1741476777,"status":"completed","error":null,"incomplete_details":null,)"
      R"("model":"o3-2025-04-16","output":[{"type":"reasoning","id":"rs_1","summary":[]}],)"
      R"("usage":{"input_tokens":81,"input_tokens_details":{"cached_tokens":0},"output_tokens":1035,)"
      R"("output_tokens_details":{"reasoning_tokens":832},"total_tokens":1116}})");
  EXPECT_EQ(u.input_tokens, 81u);
  EXPECT_EQ(u.cached_input_tokens, 0u);
  EXPECT_EQ(u.output_tokens, 1035u);
  EXPECT_EQ(u.reasoning_tokens, 832u);
  EXPECT_EQ(u.model, "o3-2025-04-16");
  EXPECT_EQ(u.error, std::nullopt);
  auto e = usage_of_body(api_kind::openai_responses,
                         R"({"error":{"message":"Invalid 'input[0].content': empty array.",)"
                         R"("type":"invalid_request_error","param":"input[0].content",)"
                         R"("code":"empty_array"}})");
  EXPECT_EQ(e.error, "Invalid 'input[0].content': empty array.");
}

// ---- OpenAI Chat Completions -------------------------------------------------------------------

const std::string chat_stream =
    R"(data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b376dfbbd5","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null})"
    "\n\n"
    R"(data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}})"
    "\n\n"
    "data: [DONE]\n\n";

TEST(ChatUsage, StreamWithIncludeUsage) {
  stream_usage s(api_kind::openai_chat);
  auto events = events_of(chat_stream);
  ASSERT_EQ(events.size(), 5u);
  for (size_t i = 0; i < 3; ++i) s.add(events[i]);
  EXPECT_FALSE(s.completed());  // finish_reason, but the usage chunk is still to come
  s.add(events[3]);
  EXPECT_TRUE(s.completed());
  s.add(events[4]);
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 1117u);
  EXPECT_EQ(s.usage().cached_input_tokens, 1024u);
  EXPECT_EQ(s.usage().output_tokens, 46u);
  EXPECT_EQ(s.usage().reasoning_tokens, 0u);
  EXPECT_EQ(s.usage().model, "gpt-4.1-2025-04-14");
}

TEST(ChatUsage, DoneEndsAStreamWithoutUsage) {
  std::string no_usage = chat_stream;
  auto cut = no_usage.find(
      "data: {\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\","
      "\"object\":\"chat.completion.chunk\",\"created\":1741569952,"
      "\"model\":\"gpt-4.1-2025-04-14\",\"choices\":[],");
  ASSERT_NE(cut, std::string::npos);
  no_usage.erase(cut, no_usage.find("data: [DONE]") - cut);
  stream_usage s(api_kind::openai_chat);
  auto events = events_of(no_usage);
  ASSERT_EQ(events.size(), 4u);
  for (size_t i = 0; i < 3; ++i) s.add(events[i]);
  EXPECT_FALSE(s.completed());
  s.add(events[3]);
  EXPECT_TRUE(s.completed());
  EXPECT_FALSE(s.usage().known());
}

TEST(ChatUsage, FinishReasonAndUsageInOneChunk) {
  // As OpenAI-compatible servers (vLLM, Gemini's) send it, with reasoning counted.
  auto s =
      stream_of(api_kind::openai_chat,
                R"(data: {"id":"1","object":"chat.completion.chunk","model":"deepseek-reasoner",)"
                R"("choices":[{"index":0,"delta":{"content":"4"},"finish_reason":"stop"}],"usage":)"
                R"({"prompt_tokens":20,"completion_tokens":300,"completion_tokens_details":)"
                R"({"reasoning_tokens":280}}})"
                "\n\n");
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().output_tokens, 300u);
  EXPECT_EQ(s.usage().reasoning_tokens, 280u);
  EXPECT_EQ(s.usage().cached_input_tokens, std::nullopt);
}

TEST(ChatUsage, BodyAndErrors) {
  auto u = usage_of_body(
      api_kind::openai_chat,
      R"({"id":"chatcmpl-123","object":"chat.completion","created":1677652288,)"
      R"("model":"o3-mini-2025-01-31","choices":[{"index":0,"message":{"role":"assistant",)"
      R"("content":"Hi"},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,)"
      R"("completion_tokens":212,"total_tokens":221,"prompt_tokens_details":{"cached_tokens":0},)"
      R"("completion_tokens_details":{"reasoning_tokens":192}}})");
  EXPECT_EQ(u.input_tokens, 9u);
  EXPECT_EQ(u.cached_input_tokens, 0u);
  EXPECT_EQ(u.output_tokens, 212u);
  EXPECT_EQ(u.reasoning_tokens, 192u);
  EXPECT_EQ(u.model, "o3-mini-2025-01-31");
  auto e =
      usage_of_body(api_kind::openai_chat,
                    R"({"error":{"message":"You exceeded your current quota.",)"
                    R"("type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
  EXPECT_EQ(e.error, "You exceeded your current quota.");
  auto s = stream_of(api_kind::openai_chat,
                     R"(data: {"error":{"message":"upstream timeout","type":"server_error"}})"
                     "\n\n");
  EXPECT_EQ(s.usage().error, "upstream timeout");
  EXPECT_EQ(usage_of_body(api_kind::openai_chat, R"({"error":"Bad gateway"})").error,
            "Bad gateway");
}

// ---- Gemini ------------------------------------------------------------------------------------

const std::string gemini_chunk_1 =
    R"({"candidates": [{"content": {"parts": [{"text": "Hel"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 2817,"candidatesTokenCount": 1,"totalTokenCount": 3012,"cachedContentTokenCount": 2048,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 2817}],"thoughtsTokenCount": 194},"modelVersion": "gemini-2.5-pro","responseId": "nYqFaNb2J8W_nvgP-pHg4Ak"})";
const std::string gemini_chunk_2 =
    R"({"candidates": [{"content": {"parts": [{"text": "lo."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 2817,"candidatesTokenCount": 12,"totalTokenCount": 3023,"cachedContentTokenCount": 2048,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 2817}],"thoughtsTokenCount": 194},"modelVersion": "gemini-2.5-pro","responseId": "nYqFaNb2J8W_nvgP-pHg4Ak"})";

TEST(GeminiUsage, StreamWithCrLfLines) {
  stream_usage s(api_kind::gemini);
  auto events =
      events_of("data: " + gemini_chunk_1 + "\r\n\r\ndata: " + gemini_chunk_2 + "\r\n\r\n");
  ASSERT_EQ(events.size(), 2u);
  s.add(events[0]);
  EXPECT_FALSE(s.completed());
  EXPECT_EQ(s.usage().output_tokens, 1u + 194u);
  s.add(events[1]);
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 2817u);
  EXPECT_EQ(s.usage().cached_input_tokens, 2048u);
  EXPECT_EQ(s.usage().output_tokens, 12u + 194u);
  EXPECT_EQ(s.usage().reasoning_tokens, 194u);
  EXPECT_EQ(s.usage().cache_write_tokens, std::nullopt);
  EXPECT_EQ(s.usage().model, "gemini-2.5-pro");
}

TEST(GeminiUsage, StubStream) {
  // tests/agents/stub_model.py: one chunk, \r\n line ends, no thoughts or cache.
  auto s = stream_of(
      api_kind::gemini,
      R"(data: {"candidates": [{"content": {"role": "model", "parts": [{"text": "Done."}]}, )"
      R"("finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 10, )"
      R"("candidatesTokenCount": 5, "totalTokenCount": 15}, "modelVersion": "stub", "responseId": )"
      R"("gem_0001"})"
      "\r\n\r\n");
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 10u);
  EXPECT_EQ(s.usage().output_tokens, 5u);
  EXPECT_EQ(s.usage().cached_input_tokens, std::nullopt);
  EXPECT_EQ(s.usage().reasoning_tokens, std::nullopt);
  EXPECT_EQ(s.usage().model, "stub");
}

TEST(GeminiUsage, BodyAndArrayOfChunks) {
  auto u = usage_of_body(api_kind::gemini, gemini_chunk_2);
  EXPECT_EQ(u.input_tokens, 2817u);
  EXPECT_EQ(u.output_tokens, 206u);
  auto a = usage_of_body(api_kind::gemini, "[" + gemini_chunk_1 + ",\n" + gemini_chunk_2 + "]");
  EXPECT_EQ(a, u);  // the last usageMetadata wins
  // Tool-use prompt tokens (a grounding search's results) are input too.
  auto t = usage_of_body(api_kind::gemini,
                         R"({"usageMetadata":{"promptTokenCount":100,"toolUsePromptTokenCount":)"
                         R"(50,"candidatesTokenCount":7,"totalTokenCount":157}})");
  EXPECT_EQ(t.input_tokens, 150u);
  EXPECT_EQ(t.output_tokens, 7u);
}

TEST(GeminiUsage, Errors) {
  const std::string error =
      R"({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", )"
      R"("status": "RESOURCE_EXHAUSTED"}})";
  EXPECT_EQ(usage_of_body(api_kind::gemini, error).error,
            "Resource has been exhausted (e.g. check quota).");
  EXPECT_EQ(usage_of_body(api_kind::gemini, "[" + error + "]").error,
            "Resource has been exhausted (e.g. check quota).");
  EXPECT_EQ(
      usage_of_body(api_kind::gemini, R"({"error":{"code":503,"status":"UNAVAILABLE"}})").error,
      "UNAVAILABLE");
  EXPECT_EQ(usage_of_body(api_kind::gemini, R"({"error":{"code":500}})").error, "500");
  auto s = stream_of(api_kind::gemini, "data: " + gemini_chunk_1 + "\n\ndata: " + error + "\n\n");
  EXPECT_EQ(s.usage().error, "Resource has been exhausted (e.g. check quota).");
  EXPECT_FALSE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 2817u);
}

TEST(GeminiUsage, ABlockedPromptEndsTheResponse) {
  auto s =
      stream_of(api_kind::gemini, R"(data: {"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},)"
                                  R"("usageMetadata":{"promptTokenCount":33,"totalTokenCount":33},)"
                                  R"("modelVersion":"gemini-2.5-flash"})"
                                  "\n\n");
  EXPECT_TRUE(s.completed());
  EXPECT_EQ(s.usage().input_tokens, 33u);
  EXPECT_EQ(s.usage().output_tokens, std::nullopt);
}

// ---- Unknown API: the shape decides ------------------------------------------------------------

TEST(UnknownApiUsage, BodiesOfEachShape) {
  auto a = usage_of_body(api_kind::unknown,
                         R"({"type":"message","model":"claude-haiku-4-5","usage":{"input_tokens":)"
                         R"(3,"cache_read_input_tokens":100,"output_tokens":4}})");
  EXPECT_EQ(a.input_tokens, 103u);
  EXPECT_EQ(a.cached_input_tokens, 100u);
  auto r = usage_of_body(api_kind::unknown,
                         R"({"object":"response","usage":{"input_tokens":103,)"
                         R"("input_tokens_details":{"cached_tokens":100},"output_tokens":4}})");
  EXPECT_EQ(r.input_tokens, 103u);
  EXPECT_EQ(r.cached_input_tokens, 100u);
  auto c =
      usage_of_body(api_kind::unknown, R"({"usage":{"prompt_tokens":7,"completion_tokens":8}})");
  EXPECT_EQ(c.input_tokens, 7u);
  EXPECT_EQ(c.output_tokens, 8u);
  auto g = usage_of_body(api_kind::unknown, gemini_chunk_2);
  EXPECT_EQ(g.output_tokens, 206u);
  EXPECT_EQ(usage_of_body(api_kind::unknown, "[" + gemini_chunk_2 + "]"), g);
  auto e = usage_of_body(api_kind::unknown, R"({"error":{"message":"no such model"}})");
  EXPECT_EQ(e.error, "no such model");
  EXPECT_FALSE(e.known());
  EXPECT_EQ(usage_of_body(api_kind::unknown, R"({"hello":"world"})"), call_usage{});
}

TEST(UnknownApiUsage, StreamsOfEachShape) {
  auto matches = [](const std::string& stream, api_kind api) {
    auto known = stream_of(api, stream);
    auto guessed = stream_of(api_kind::unknown, stream);
    EXPECT_EQ(guessed.usage(), known.usage()) << to_string(api);
    EXPECT_EQ(guessed.completed(), known.completed()) << to_string(api);
  };
  matches(anthropic_stream, api_kind::anthropic_messages);
  matches(responses_stream, api_kind::openai_responses);
  matches(chat_stream, api_kind::openai_chat);
  matches("data: " + gemini_chunk_1 + "\n\ndata: " + gemini_chunk_2 + "\n\n", api_kind::gemini);
}

// ---- Hostile values ----------------------------------------------------------------------------

TEST(HostileUsage, WrongTypesAndOutOfRangeNumbersAreIgnored) {
  for (std::string bad : {R"("12")", "-5", "1e300", "12.5", "9007199254740993",
                          "18446744073709551616", "true", "null", "[1]", R"({"a":[{"b":1}]})"}) {
    auto u = usage_of_body(api_kind::anthropic_messages,
                           R"({"type":"message","usage":{"input_tokens":)" + bad +
                               R"(,"cache_read_input_tokens":)" + bad + R"(,"output_tokens":7}})");
    EXPECT_EQ(u.input_tokens, std::nullopt) << bad;
    EXPECT_EQ(u.cached_input_tokens, std::nullopt) << bad;
    EXPECT_EQ(u.output_tokens, 7u) << bad;
    auto r = usage_of_body(api_kind::openai_responses, R"({"usage":{"input_tokens":)" + bad +
                                                           R"(,"input_tokens_details":)" + bad +
                                                           R"(,"output_tokens":)" + bad + "}}");
    EXPECT_FALSE(r.known()) << bad;
    auto g = usage_of_body(api_kind::gemini, R"({"usageMetadata":{"promptTokenCount":)" + bad +
                                                 R"(,"thoughtsTokenCount":)" + bad +
                                                 R"(,"candidatesTokenCount":3}})");
    EXPECT_EQ(g.input_tokens, std::nullopt) << bad;
    EXPECT_EQ(g.output_tokens, 3u) << bad;
    EXPECT_EQ(g.reasoning_tokens, std::nullopt) << bad;
  }
  // 2^53 itself is still a count.
  EXPECT_EQ(usage_of_body(api_kind::openai_chat, R"({"usage":{"prompt_tokens":9007199254740992}})")
                .input_tokens,
            9007199254740992u);
}

TEST(HostileUsage, MisshapenDocumentsGiveNothing) {
  for (api_kind api : {api_kind::anthropic_messages, api_kind::openai_responses,
                       api_kind::openai_chat, api_kind::gemini, api_kind::unknown}) {
    for (std::string body : std::vector<std::string>{
             "", "not json", "{", "[]", "[[[[1]]]]", "null", "42", R"("usage")",
             R"({"usage":[1,2,3]})", R"({"usage":"lots"})", R"({"usageMetadata":[{"x":1}]})",
             R"({"message":7,"response":[],"choices":{"a":1},"candidates":"x","error":42})",
             R"({"type":"message_start","message":{"usage":{"input_tokens":{"input_tokens":1}}}})",
             R"([1,"a",null,{"usageMetadata":null}])", std::string(100000, '[')}) {
      auto u = usage_of_body(api, body);
      EXPECT_FALSE(u.known()) << to_string(api) << ": " << body.substr(0, 80);
      stream_usage s(api);
      s.add({"", body});
      s.add({"message_start", body});
      s.add({"response.completed", body});
      EXPECT_FALSE(s.usage().known()) << to_string(api) << ": " << body.substr(0, 80);
    }
  }
}

TEST(HostileUsage, ModelTextThatIsNotUtf8KeepsTheUsage) {
  auto u =
      usage_of_body(api_kind::anthropic_messages,
                    "{\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}],"
                    "\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}");
  EXPECT_EQ(u.input_tokens, 5u);
  EXPECT_EQ(u.output_tokens, 6u);
}

TEST(HostileUsage, EventsOfAnotherApiOrOutOfOrder) {
  // A Gemini chunk on an Anthropic stream says nothing; message_delta before message_start
  // still counts its output; message_stop twice is still one end.
  stream_usage s(api_kind::anthropic_messages);
  s.add({"", gemini_chunk_2});
  EXPECT_FALSE(s.usage().known());
  s.add({"message_delta", R"({"type":"message_delta","usage":{"output_tokens":9}})"});
  EXPECT_EQ(s.usage().output_tokens, 9u);
  EXPECT_EQ(s.usage().input_tokens, std::nullopt);
  s.add({"message_stop", R"({"type":"message_stop"})"});
  s.add({"message_stop", "garbage"});
  EXPECT_TRUE(s.completed());
  // [DONE] ends only Chat Completions.
  stream_usage r(api_kind::openai_responses);
  r.add({"", "[DONE]"});
  EXPECT_FALSE(r.completed());
}

}  // namespace
}  // namespace evalbox::harness::gateway
