// The SSE reader and the usage readers of the four model APIs (usage.h). Formats, as the APIs
// document them and as the clients' stub (tests/agents/stub_model.py) serves them:
//   Anthropic Messages  https://docs.anthropic.com/en/api/messages-streaming
//   OpenAI Responses    https://platform.openai.com/docs/api-reference/responses-streaming
//   Chat Completions    https://platform.openai.com/docs/api-reference/chat-streaming
//   Gemini              https://ai.google.dev/api/generate-content#UsageMetadata
#include "harness/gateway/usage.h"

#include <initializer_list>
#include <utility>

#include "base/json.h"
#include "base/json_checks.h"
#include "base/json_get.h"

namespace evalbox::harness::gateway {

std::string_view to_string(api_kind k) noexcept {
  switch (k) {
    case api_kind::anthropic_messages:
      return "anthropic-messages";
    case api_kind::openai_responses:
      return "openai-responses";
    case api_kind::openai_chat:
      return "openai-chat";
    case api_kind::gemini:
      return "gemini";
    case api_kind::unknown:
      break;
  }
  return "unknown";
}

api_kind api_of(std::string_view method, std::string_view target) {
  if (method != "POST") return api_kind::unknown;
  std::string_view path = target.substr(0, target.find_first_of("?#"));
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path.ends_with("/messages")) return api_kind::anthropic_messages;
  if (path.ends_with("/responses")) return api_kind::openai_responses;
  if (path.ends_with("/chat/completions")) return api_kind::openai_chat;
  // Gemini names the method after the model: /v1beta/models/gemini-2.5-pro:generateContent.
  std::string_view last = path.substr(path.rfind('/') + 1);
  for (std::string_view verb : {":generateContent", ":streamGenerateContent"}) {
    if (last.size() > verb.size() && last.ends_with(verb)) return api_kind::gemini;
  }
  return api_kind::unknown;
}

// ---- sse_reader -------------------------------------------------------------------------------

namespace {

constexpr std::string_view bom = "\xEF\xBB\xBF";
constexpr size_t max_field_name = 8;  // longer than "event": no field this reader keeps

// Appends `v` to `s` without letting its capacity pass `limit` when its size stays within it:
// the string's own growth doubles, which near the limit would allocate up to twice of it.
void append_within(std::string& s, std::string_view v, size_t limit) {
  size_t need = s.size() + v.size();
  if (need > s.capacity() && s.capacity() > limit / 2) {
    std::string bigger;
    bigger.reserve(limit);
    bigger.append(s);
    s.swap(bigger);
  }
  s.append(v);
}

void release(std::string& s) { std::string().swap(s); }

}  // namespace

sse_reader::sse_reader(size_t max_event) : max_event_(max_event) {}

size_t sse_reader::buffered() const noexcept {
  return event_.capacity() + data_.capacity() + name_.capacity();
}

void sse_reader::feed(std::string_view bytes, std::vector<sse_event>& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    char c = bytes[i];
    if (place_ == place::value && c != '\r' && c != '\n') {
      // A field's value: up to the end of the line at once.
      size_t end = bytes.find_first_of("\r\n", i);
      if (end == std::string_view::npos) end = bytes.size();
      append_value(bytes.substr(i, end - i));
      i = end;
      continue;
    }
    take(c, out);
    ++i;
  }
}

void sse_reader::take(char c, std::vector<sse_event>& out) {
  if (!bom_done_) {
    if (c == bom[bom_seen_]) {
      if (++bom_seen_ == bom.size()) bom_done_ = true;
      return;
    }
    bom_done_ = true;
    for (size_t k = 0; k < bom_seen_; ++k) take(bom[k], out);  // they were no BOM after all
  }
  if (after_cr_) {
    after_cr_ = false;
    if (c == '\n') return;  // the \n of a \r\n
  }
  if (c == '\r' || c == '\n') {
    end_line(out);
    after_cr_ = c == '\r';
    return;
  }
  switch (place_) {
    case place::name:
      if (c == ':') {
        // A line starting with ':' is a comment; any other field but these two is ignored.
        if (!line_empty_ && !name_long_ && name_ == "data") {
          field_ = field::data;
        } else if (!line_empty_ && !name_long_ && name_ == "event") {
          field_ = field::event;
        } else {
          field_ = field::ignored;
        }
        place_ = place::value_start;
        begin_value();
      } else if (name_.size() < max_field_name) {
        name_ += c;
      } else {
        name_long_ = true;
      }
      line_empty_ = false;
      return;
    case place::value_start:
      place_ = place::value;
      if (c == ' ') return;  // the one space after the colon
      [[fallthrough]];
    case place::value:
      append_value(std::string_view(&c, 1));
      return;
  }
}

void sse_reader::begin_value() {
  if (field_ == field::data) {
    if (has_data_) append_value("\n");  // lines are joined with \n
    has_data_ = true;
  } else if (field_ == field::event && !oversize_) {
    event_.clear();  // a second event: line replaces the first
  }
}

void sse_reader::append_value(std::string_view v) {
  if (oversize_ || field_ == field::ignored) return;
  std::string& to = field_ == field::data ? data_ : event_;
  size_t limit = field_ == field::data ? max_event_ : max_event_name;
  if (v.size() > limit - to.size()) {
    // Too large to keep: the event is dropped at its end, its bytes ignored until then.
    oversize_ = true;
    release(data_);
    release(event_);
    return;
  }
  append_within(to, v, limit);
}

void sse_reader::end_line(std::vector<sse_event>& out) {
  if (line_empty_) {
    dispatch(out);
  } else if (place_ == place::name) {
    // A field name alone: its value is empty ("data" alone is an empty data line).
    field_ = name_long_         ? field::ignored
             : name_ == "data"  ? field::data
             : name_ == "event" ? field::event
                                : field::ignored;
    begin_value();
  }
  name_.clear();
  name_long_ = false;
  line_empty_ = true;
  place_ = place::name;
  field_ = field::ignored;
}

void sse_reader::dispatch(std::vector<sse_event>& out) {
  if (has_data_) {
    if (oversize_) {
      ++dropped_;
    } else {
      out.push_back(sse_event{std::move(event_), std::move(data_)});
    }
  }
  event_.clear();
  data_.clear();
  has_data_ = false;
  oversize_ = false;
}

void sse_reader::finish(std::vector<sse_event>& out) {
  // Bytes of a BOM that never completed hold no field: nothing to replay.
  if (!line_empty_) end_line(out);
  dispatch(out);
  size_t dropped = dropped_;
  *this = sse_reader(max_event_);
  dropped_ = dropped;
}

// ---- usage ------------------------------------------------------------------------------------

bool call_usage::known() const { return input_tokens.has_value() || output_tokens.has_value(); }

namespace {

using detail::usage_state;

// Counts larger than a double holds exactly are no real count: ignored, as negative ones are.
constexpr uint64_t max_count = uint64_t{1} << 53;

std::optional<uint64_t> count(const json& j, std::string_view key) {
  auto v = json_find<uint64_t>(j, key);
  if (v && *v > max_count) return std::nullopt;
  return v;
}

// The sum of the parts that are known; unknown when none is.
std::optional<uint64_t> sum(std::initializer_list<std::optional<uint64_t>> parts) {
  std::optional<uint64_t> total;
  for (const auto& p : parts) {
    if (p) total = total.value_or(0) + *p;
  }
  return total;
}

void keep(std::optional<uint64_t>& to, std::optional<uint64_t> v) {
  if (v) to = v;
}

bool has(const json& j, std::string_view key) { return !json_member(j, key).is_null(); }

std::string string_or_empty(const json& j, std::string_view key) {
  return json_value_or(j, key, "");
}

// Hostile text as JSON, or a discarded value: too deep to copy safely is refused, and bytes that
// are not UTF-8 (a model's text can hold any) become U+FFFD rather than losing the usage.
json parse_untrusted(std::string_view text) {
  if (json_too_deep(text)) return json(json::value_t::discarded);
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    const std::string clean = sanitize_json_text(text);
    if (clean != text) j = json::parse(clean.begin(), clean.end(), nullptr, false);
  }
  return j;
}

// What an error object or string says: its message, else its status, code or type.
std::optional<std::string> describe_error(const json& e) {
  if (e.is_string()) {
    const auto& s = e.get_ref<const std::string&>();
    return s.empty() ? std::nullopt : std::optional<std::string>(s);
  }
  if (!e.is_object()) return std::nullopt;
  for (std::string_view key : {"message", "status", "code", "type"}) {
    if (auto s = json_find<std::string>(e, key); s && !s->empty()) return s;
    if (key == "code") {
      if (auto n = json_find<int64_t>(e, key)) return std::to_string(*n);
    }
  }
  return std::nullopt;
}

// The error a response or event carries: {"error": {...}} (OpenAI, Gemini, and Anthropic's
// {"type":"error","error":{...}}), {"error": "text"}, or the Responses API's error event
// {"type":"error","code":...,"message":...}.
std::optional<std::string> error_in(const json& j) {
  if (!j.is_object()) return std::nullopt;
  if (auto m = describe_error(json_member(j, "error"))) return m;
  if (string_or_empty(j, "type") == "error") return describe_error(j);
  return std::nullopt;
}

// The first error is the one to report: what follows it is its consequence.
void note_error(usage_state& s, std::optional<std::string> message) {
  if (message && !s.usage.error) s.usage.error = std::move(message);
}

void note_model(usage_state& s, const json& j, std::string_view key) {
  if (auto m = json_find<std::string>(j, key); m && !m->empty()) s.usage.model = std::move(*m);
}

// -- Anthropic Messages: input_tokens excludes the cache reads and writes; evalbox counts every
// input token. message_start holds the input side and a first output_tokens; message_delta's
// output_tokens is cumulative, and newer API versions repeat the input side there too.

void anthropic_usage(usage_state& s, const json& u) {
  if (!u.is_object()) return;
  auto& a = s.anthropic;
  keep(a.input, count(u, "input_tokens"));
  keep(a.cache_read, count(u, "cache_read_input_tokens"));
  keep(a.cache_creation, count(u, "cache_creation_input_tokens"));
  keep(a.output, count(u, "output_tokens"));
  s.usage.input_tokens = sum({a.input, a.cache_read, a.cache_creation});
  s.usage.cached_input_tokens = a.cache_read;
  s.usage.cache_write_tokens = a.cache_creation;
  s.usage.output_tokens = a.output;
}

void anthropic_message(usage_state& s, const json& message) {
  note_model(s, message, "model");
  anthropic_usage(s, json_member(message, "usage"));
}

void anthropic_event(usage_state& s, std::string_view type, const json& d) {
  if (type == "message_start") {
    anthropic_message(s, json_member(d, "message"));
  } else if (type == "message_delta") {
    anthropic_usage(s, json_member(d, "usage"));
  } else if (type == "message_stop") {
    s.completed = true;
  }
}

// -- OpenAI: input counts cached tokens and output counts reasoning, as evalbox does. The
// Responses API and Chat Completions name the same four counts differently.

struct openai_names {
  std::string_view input, input_details, output, output_details;
};
constexpr openai_names responses_names{"input_tokens", "input_tokens_details", "output_tokens",
                                       "output_tokens_details"};
constexpr openai_names chat_names{"prompt_tokens", "prompt_tokens_details", "completion_tokens",
                                  "completion_tokens_details"};

void openai_usage(usage_state& s, const json& u, const openai_names& n) {
  if (!u.is_object()) return;
  keep(s.usage.input_tokens, count(u, n.input));
  keep(s.usage.cached_input_tokens, count(json_member(u, n.input_details), "cached_tokens"));
  keep(s.usage.output_tokens, count(u, n.output));
  keep(s.usage.reasoning_tokens, count(json_member(u, n.output_details), "reasoning_tokens"));
}

// A Responses API response object: the body, or data.response of a response.* event.
void responses_response(usage_state& s, const json& r) {
  note_model(s, r, "model");
  openai_usage(s, json_member(r, "usage"), responses_names);
  if (auto m = error_in(r)) {
    note_error(s, std::move(m));
  } else if (string_or_empty(r, "status") == "failed") {
    note_error(s, "response failed");
  }
}

void responses_event(usage_state& s, std::string_view type, const json& d) {
  if (!type.starts_with("response.")) return;
  const json& r = json_member(d, "response");
  if (r.is_object()) responses_response(s, r);
  if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
    s.completed = true;
  }
}

// A Chat Completions body or chunk: the usage comes in one chunk (stream_options.include_usage),
// usually after the one with finish_reason, before [DONE].
void chat_chunk(usage_state& s, const json& c) {
  note_model(s, c, "model");
  const json& u = json_member(c, "usage");
  if (u.is_object()) {
    openai_usage(s, u, chat_names);
    s.saw_usage = true;
  }
  const json& choices = json_member(c, "choices");
  if (choices.is_array()) {
    for (const json& choice : choices) {
      if (!string_or_empty(choice, "finish_reason").empty()) s.saw_finish_reason = true;
    }
  }
  if (s.saw_finish_reason && s.saw_usage) s.completed = true;
}

// -- Gemini: usageMetadata is cumulative over a stream's chunks. promptTokenCount includes the
// cached part; thoughts are billed as output but not counted in candidatesTokenCount; tool-use
// prompt tokens (a grounding search's results) are input not counted in promptTokenCount.

void gemini_usage(usage_state& s, const json& u) {
  if (!u.is_object()) return;
  auto& g = s.gemini;
  keep(g.prompt, count(u, "promptTokenCount"));
  keep(g.tool_use_prompt, count(u, "toolUsePromptTokenCount"));
  keep(g.cached, count(u, "cachedContentTokenCount"));
  keep(g.candidates, count(u, "candidatesTokenCount"));
  keep(g.thoughts, count(u, "thoughtsTokenCount"));
  s.usage.input_tokens = sum({g.prompt, g.tool_use_prompt});
  s.usage.cached_input_tokens = g.cached;
  s.usage.output_tokens = sum({g.candidates, g.thoughts});
  s.usage.reasoning_tokens = g.thoughts;
}

void gemini_chunk(usage_state& s, const json& c) {
  note_model(s, c, "modelVersion");
  gemini_usage(s, json_member(c, "usageMetadata"));
  const json& candidates = json_member(c, "candidates");
  if (candidates.is_array()) {
    for (const json& candidate : candidates) {
      if (!string_or_empty(candidate, "finishReason").empty()) s.completed = true;
    }
  }
  // A blocked prompt is answered with no candidate at all.
  if (!string_or_empty(json_member(c, "promptFeedback"), "blockReason").empty()) {
    s.completed = true;
  }
  note_error(s, error_in(c));
}

// -- Unknown API: the shape decides.

api_kind shape_of(const json& j) {
  if (j.is_array()) return api_kind::gemini;  // streamGenerateContent without alt=sse
  if (!j.is_object()) return api_kind::unknown;
  if (has(j, "usageMetadata") || has(j, "candidates") || has(j, "modelVersion") ||
      has(j, "promptFeedback")) {
    return api_kind::gemini;
  }
  std::string type = string_or_empty(j, "type");
  std::string object = string_or_empty(j, "object");
  if (object.starts_with("chat.completion") || has(j, "choices")) return api_kind::openai_chat;
  if (object == "response" || type.starts_with("response.") ||
      json_member(j, "response").is_object()) {
    return api_kind::openai_responses;
  }
  if (type == "message" || type.starts_with("message_") || type.starts_with("content_block_") ||
      type == "ping") {
    return api_kind::anthropic_messages;
  }
  const json& u = json_member(j, "usage");
  if (has(u, "prompt_tokens") || has(u, "completion_tokens")) return api_kind::openai_chat;
  if (has(u, "input_tokens_details") || has(u, "output_tokens_details")) {
    return api_kind::openai_responses;
  }
  // Plain input_tokens/output_tokens read the same either way; the cache fields are Anthropic's.
  if (has(u, "input_tokens") || has(u, "output_tokens")) return api_kind::anthropic_messages;
  return api_kind::unknown;
}

api_kind shape_of_event_name(std::string_view name) {
  if (name.starts_with("message_") || name.starts_with("content_block_") || name == "ping") {
    return api_kind::anthropic_messages;
  }
  if (name.starts_with("response.")) return api_kind::openai_responses;
  return api_kind::unknown;
}

// The events that are most of a stream and say nothing about usage, skipped unparsed.
bool is_delta(std::string_view name) {
  return name == "content_block_delta" || name == "ping" ||
         (name.starts_with("response.") && name.ends_with(".delta"));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

call_usage usage_of_body(api_kind api, std::string_view body) {
  usage_state s;
  json j = parse_untrusted(body);
  if (j.is_discarded()) return {};
  s.api = api == api_kind::unknown ? shape_of(j) : api;
  switch (s.api) {
    case api_kind::anthropic_messages:
      anthropic_message(s, j);
      break;
    case api_kind::openai_responses:
      responses_response(s, j);
      break;
    case api_kind::openai_chat:
      chat_chunk(s, j);
      break;
    case api_kind::gemini:
      if (j.is_array()) {
        for (const json& chunk : j) gemini_chunk(s, chunk);
      } else {
        gemini_chunk(s, j);
      }
      break;
    case api_kind::unknown:
      break;
  }
  note_error(s, error_in(j));
  return std::move(s.usage);
}

stream_usage::stream_usage(api_kind api) { s_.api = api; }

void stream_usage::add(const sse_event& e) {
  if (s_.api == api_kind::unknown) s_.api = shape_of_event_name(e.event);
  if (trim(e.data) == "[DONE]") {
    // Chat Completions' last event; no other API sends it.
    if (s_.api == api_kind::unknown) s_.api = api_kind::openai_chat;
    if (s_.api == api_kind::openai_chat) s_.completed = true;
    return;
  }
  if (is_delta(e.event)) return;
  json d = parse_untrusted(e.data);
  if (d.is_discarded()) return;
  if (s_.api == api_kind::unknown) s_.api = shape_of(d);
  // The data's own type first: some proxies name every event alike, or none.
  std::string type = string_or_empty(d, "type");
  if (type.empty()) type = e.event;
  switch (s_.api) {
    case api_kind::anthropic_messages:
      anthropic_event(s_, type, d);
      break;
    case api_kind::openai_responses:
      responses_event(s_, type, d);
      break;
    case api_kind::openai_chat:
      chat_chunk(s_, d);
      break;
    case api_kind::gemini:
      if (d.is_array()) {
        for (const json& chunk : d) gemini_chunk(s_, chunk);
      } else {
        gemini_chunk(s_, d);
      }
      break;
    case api_kind::unknown:
      break;
  }
  note_error(s_, error_in(d));
}

}  // namespace evalbox::harness::gateway
