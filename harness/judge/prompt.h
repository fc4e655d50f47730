// The judge's prompt: the propositions a fixture declares and the evidence from the run, each
// piece bounded and the evidence wrapped in markers that carry a per-request random nonce, so
// that what the agent wrote (its final message, its files) is read as untrusted data and
// cannot close the marker or change the answer's format. Pure: no I/O but the nonce's entropy.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace evalbox::harness {
inline namespace judge {

// One piece of evidence as the prompt shows it: its label (final_message, diff, commands,
// file:PATH) and its text, already bounded (bound_evidence).
struct evidence_item {
  std::string label;
  std::string text;
};

struct judge_prompt {
  std::string nonce;             // 32 hex digits, fresh per request
  std::string system;            // the instructions and the answer format
  std::string user;              // the propositions, then the evidence between the markers
  std::vector<std::string> ids;  // the proposition ids the answer must name, in order
};

// The longest reason an answer may give for one proposition (the parser refuses longer).
inline constexpr size_t max_judge_reason_bytes = 2000;

// 128 random bits as 32 lowercase hex digits (std::random_device).
std::string make_nonce();

// `text` as valid UTF-8 (each invalid sequence becomes U+FFFD), cut to at most `max` bytes at a
// UTF-8 boundary with a line saying how much there was. Control characters other than tab and
// newline become U+FFFD too (they could hide text from a person reading the prompt).
std::string bound_evidence(std::string_view text, size_t max);

// The prompt for `propositions` (ids p1..pN, proposition_id) over `evidence`. The markers are
// "<<<EVIDENCE {nonce} {label}>>>" and "<<<END EVIDENCE {nonce}>>>"; any occurrence of the
// nonce inside the evidence is replaced (it cannot be guessed, but a marker must be unforgeable
// even then).
judge_prompt build_judge_prompt(std::span<const std::string> propositions,
                                std::span<const evidence_item> evidence, std::string nonce);

}  // namespace judge
}  // namespace evalbox::harness
