// The judge's answer, read strictly: raw JSON or exactly one fenced block holding
// {"checks":[{"id","verdict","reason"}]}, one entry per proposition id (none missing, none
// extra, none twice), verdict "pass" or "fail", a non-empty bounded reason, and nothing else.
// Anything else is an error — which grading makes a grader error, never a pass and never a
// task failure. And the majority of several answers (votes). Pure.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "harness/transcripts/transcript.h"

namespace evalbox::harness {
inline namespace judge {

// The longest answer read (a longer one is an error, not cut).
inline constexpr size_t max_judge_answer_bytes = 64u << 10;

// One answer of a judge, as its client returns it (client.h).
struct judge_exchange {
  std::string text;                  // the model's answer (bounded by the reply's size)
  usage tokens;                      // as the reply reports them; unknown fields null
  int attempts = 1;                  // requests made (1 + retries used)
  std::vector<std::string> retried;  // why each earlier attempt failed
};

struct judge_verdict {
  std::string id;
  bool pass = false;
  std::string reason;
};

// The verdicts of `text` in the order of `ids`, or an invalid_argument error saying what is
// wrong with the answer (without quoting more than a few bytes of it).
result<std::vector<judge_verdict>> parse_judge_answer(std::string_view text,
                                                      std::span<const std::string> ids);

// One proposition's tally over every vote: passed when more votes say pass than fail (a tie
// fails).
struct judge_tally {
  std::string id;
  int pass = 0;
  int fail = 0;
  bool passed = false;
  std::vector<std::string> reasons;  // one per vote, in vote order
};

// `votes`: each a parse_judge_answer result for the same `ids`.
std::vector<judge_tally> judge_majority(std::span<const std::vector<judge_verdict>> votes,
                                        std::span<const std::string> ids);

}  // namespace judge
}  // namespace evalbox::harness
