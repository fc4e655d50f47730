// A faster lexer for the JSON lines evalbox reads by the hundred thousand (results.jsonl:
// every report, resume and merge lexes each record). nlohmann's lexer stays the reference: this
// one either produces exactly the SAX events nlohmann would for an accepted line, or declines
// and leaves the line to it.
#pragma once

#include <string_view>

#include "base/json.h"

namespace evalbox::harness {
inline namespace results {

// Feeds `text` to `sax` as json::sax_parse(text, &sax, json, /*strict=*/true) does, with
// RapidJSON's lexer (several times faster). True: the whole text was accepted and `sax` saw
// the events nlohmann would have sent it, in the same order, with the same values. False: the
// text is not valid JSON, `sax` refused an event, or it holds what this lexer leaves to
// nlohmann (a \u escape, a NUL byte, a byte-order mark, a number nlohmann converts
// differently); `sax` may have seen some events, so the caller parses the text again with
// nlohmann into a fresh one, whose answer is the one that counts.
bool sax_parse_fast(std::string_view text, nlohmann::json_sax<json>& sax);

// json::sax_parse(text, &sax, json, /*strict=*/true), the fast lexer first: where it declines,
// `sax` is reset to `fresh` and nlohmann lexes the text from the start.
template <class Sax>
bool sax_parse(std::string_view text, Sax& sax, const Sax& fresh) {
  if (sax_parse_fast(text, sax)) return true;
  sax = fresh;
  return json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json,
                         /*strict=*/true);
}

}  // namespace results
}  // namespace evalbox::harness
