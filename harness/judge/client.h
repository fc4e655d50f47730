// Asking a judge: the request each adapter sends (openai-responses: POST {base_url}/v1/responses;
// anthropic-messages: POST {base_url}/v1/messages; command: the request JSON on the program's
// stdin), the answer's text and token usage read from its reply, and bounded retries with
// backoff. The API key is the caller's (read from the host's environment): it goes into a
// header or the command's environment and nowhere else — never into a message or a record.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "harness/config/spec.h"
#include "harness/judge/answer.h"
#include "harness/judge/prompt.h"

namespace evalbox::harness {
inline namespace judge {

// The request body of an HTTP adapter, and the JSON a command judge reads on stdin
// (evalbox.judge-request.v1: model, system, user, ids, nonce).
json judge_request_body(const judge_spec& judge, const judge_prompt& prompt);

// The answer's text and usage from an HTTP adapter's 200 reply; an error when it holds none.
result<judge_exchange> read_judge_reply(const judge_spec& judge, std::string_view body);

// Asks once per attempt until an answer arrives: a transport error, a timeout, HTTP 408, 409,
// 429 or 5xx (or a command that fails) is retried judge.retries times, waiting 0.5 s, 1 s,
// 2 s, ... (at most 8 s) between attempts; another HTTP status is an error at once. The error
// says what the last attempt met.
result<judge_exchange> ask_judge(const judge_spec& judge, const judge_prompt& prompt,
                                 const std::string& api_key);

}  // namespace judge
}  // namespace evalbox::harness
