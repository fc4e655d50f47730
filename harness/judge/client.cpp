// The judge adapters and their retries (see client.h).
#include "harness/judge/client.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "base/json_checks.h"
#include "base/json_get.h"
#include "base/log.h"
#include "harness/judge/answer.h"
#include "harness/judge/http.h"
#include "sandbox/launch/host_program.h"

namespace evalbox::harness {
inline namespace judge {

namespace {

using ak = judge_spec::adapter_kind;

// A short, printable excerpt of a reply body for an error message.
std::string excerpt(std::string_view body) {
  std::string s = bound_evidence(body.substr(0, 300), 200);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// What one attempt met: an answer, or an error and whether another attempt may help.
struct attempt_result {
  result<judge_exchange> answer;
  bool retryable = false;
};

attempt_result ask_http(const judge_spec& judge, const judge_prompt& prompt,
                        const std::string& api_key) {
  const bool openai = judge.adapter == ak::openai_responses;
  std::vector<std::pair<std::string, std::string>> headers{{"content-type", "application/json"}};
  if (openai) {
    headers.emplace_back("authorization", "Bearer " + api_key);
  } else {
    headers.emplace_back("x-api-key", api_key);
    headers.emplace_back("anthropic-version", "2023-06-01");
  }
  const std::string url = judge.base_url + (openai ? "/v1/responses" : "/v1/messages");
  const std::string body =
      judge_request_body(judge, prompt).dump(-1, ' ', false, json::error_handler_t::replace);
  auto reply = http_post(url, headers, body, std::chrono::milliseconds(judge.timeout_ms));
  if (!reply) return {std::unexpected(reply.error()), true};
  const int status = reply->status;
  if (status != 200) {
    const bool retry = status == 408 || status == 409 || status == 429 || status >= 500;
    return {make_error(error_kind::io, "POST {}: HTTP {}: {}", url, status, excerpt(reply->body)),
            retry};
  }
  auto read = read_judge_reply(judge, reply->body);
  return {std::move(read), false};
}

attempt_result ask_command(const judge_spec& judge, const judge_prompt& prompt,
                           const std::string& api_key) {
  sandbox::host_program p;
  p.argv = judge.argv;
  // A minimal environment: a PATH, a locale, and the key variable when the judge names one.
  p.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"}};
  if (const char* home = std::getenv("HOME")) p.env["HOME"] = home;
  if (!judge.api_key_env.empty()) p.env[judge.api_key_env] = api_key;
  p.input = judge_request_body(judge, prompt).dump(-1, ' ', false, json::error_handler_t::replace);
  p.stderr_to = sandbox::host_output::discard;
  p.max_output = max_judge_answer_bytes + 1;
  p.timeout = std::chrono::milliseconds(judge.timeout_ms);
  auto r = sandbox::run_host_program(p);
  const std::string what = fmt::format("judge command {}", judge.argv.front());
  if (!r) return {std::unexpected(r.error().with_context(what)), false};
  if (r->timed_out)
    return {make_error(error_kind::expired, "{}: no answer within {} ms", what, judge.timeout_ms),
            true};
  if (!r->ok())
    return {make_error(error_kind::io, "{}: {}", what,
                       r->signal ? fmt::format("killed by signal {}", r->signal)
                                 : fmt::format("exit {}", r->exit_code)),
            true};
  judge_exchange x;
  x.text = std::move(r->output);
  return {std::move(x), false};
}

}  // namespace

json judge_request_body(const judge_spec& judge, const judge_prompt& prompt) {
  switch (judge.adapter) {
    case ak::openai_responses:
      return {{"model", judge.model},
              {"instructions", prompt.system},
              {"input", prompt.user},
              {"max_output_tokens", judge.max_output_tokens},
              {"store", false}};
    case ak::anthropic_messages:
      return {{"model", judge.model},
              {"system", prompt.system},
              {"max_tokens", judge.max_output_tokens},
              {"messages", json::array({{{"role", "user"}, {"content", prompt.user}}})}};
    case ak::command:
      break;
  }
  return {{"schema", "evalbox.judge-request.v1"},
          {"model", judge.model},
          {"system", prompt.system},
          {"user", prompt.user},
          {"ids", prompt.ids},
          {"nonce", prompt.nonce}};
}

result<judge_exchange> read_judge_reply(const judge_spec& judge, std::string_view body) {
  json doc = json_too_deep(body, 64) ? json(nullptr)
                                     : json::parse(sanitize_json_text(body), nullptr, false);
  if (!doc.is_object())
    return make_error(error_kind::io, "the judge's reply is not a JSON object: {}", excerpt(body));
  judge_exchange x;
  bool any = false;
  // Any shape: a field that is missing or of another type is no count and no text.
  const json& use = json_member(doc, "usage");
  x.tokens.input_tokens = json_find<uint64_t>(use, "input_tokens");
  x.tokens.output_tokens = json_find<uint64_t>(use, "output_tokens");
  auto add_text = [&](const json& part, std::string_view type) {
    if (json_value_or(part, "type", "") != type) return;
    if (auto t = json_find<std::string>(part, "text")) {
      x.text += *t;
      any = true;
    }
  };
  auto each = [](const json& list, auto&& fn) {
    if (list.is_array())
      for (const auto& item : list) fn(item);
  };
  if (judge.adapter == ak::openai_responses) {
    // output: [{type: message, content: [{type: output_text, text}]}, {type: reasoning}, ...]
    x.tokens.cached_input_tokens =
        json_find<uint64_t>(json_member(use, "input_tokens_details"), "cached_tokens");
    x.tokens.reasoning_tokens =
        json_find<uint64_t>(json_member(use, "output_tokens_details"), "reasoning_tokens");
    each(json_member(doc, "output"), [&](const json& item) {
      if (json_value_or(item, "type", "") != "message") return;
      each(json_member(item, "content"), [&](const json& part) { add_text(part, "output_text"); });
    });
  } else {
    // content: [{type: text, text}, ...]
    x.tokens.cached_input_tokens = json_find<uint64_t>(use, "cache_read_input_tokens");
    each(json_member(doc, "content"), [&](const json& part) { add_text(part, "text"); });
  }
  if (!any)
    return make_error(error_kind::io, "the judge's reply holds no answer text: {}", excerpt(body));
  return x;
}

result<judge_exchange> ask_judge(const judge_spec& judge, const judge_prompt& prompt,
                                 const std::string& api_key) {
  // Whatever a server echoes back, the key never reaches a message (log.h scrubs it).
  if (!api_key.empty()) log::redact_secret(api_key);
  std::vector<std::string> retried;
  for (int attempt = 0;; ++attempt) {
    attempt_result a = judge.adapter == ak::command ? ask_command(judge, prompt, api_key)
                                                    : ask_http(judge, prompt, api_key);
    if (a.answer) {
      a.answer->attempts = attempt + 1;
      a.answer->retried = std::move(retried);
      return a.answer;
    }
    std::string why = log::scrub(a.answer.error().message);
    if (!a.retryable || attempt >= judge.retries) {
      if (attempt > 0) why += fmt::format(" (after {} attempts)", attempt + 1);
      return make_error(a.answer.error().kind, "judge {}: {}", judge.name, why);
    }
    retried.push_back(why);
    const auto wait = std::min<int64_t>(500LL << std::min(attempt, 4), 8000);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
  }
}

}  // namespace judge
}  // namespace evalbox::harness
