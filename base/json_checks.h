// Checks for JSON that comes from agents and files (native streams, results.jsonl, records,
// workspace files): nesting depth before parsing, bytes that are not UTF-8, and integer ranges
// when converting. Each guards against what nlohmann-json does not: recursion per nesting
// level, refusing a whole document for one bad byte, and unchecked casts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "base/json.h"

namespace evalbox {
inline namespace base {

// How deep JSON from agents and files may nest. nlohmann parses any depth without recursion,
// but copying, comparing and dumping a value recurse once per level: one 400 KB line of '['
// overflowed the stack. Real documents stay far below this.
inline constexpr size_t max_json_depth = 512;

// True when `text` opens more than `limit` arrays or objects inside one another (brackets in
// strings do not count). Linear, and cheap enough to run before every parse of hostile text.
bool json_too_deep(std::string_view text, size_t limit = max_json_depth) noexcept;

// The length of the UTF-8 sequence (RFC 3629: shortest form, no surrogates, at most U+10FFFF)
// that starts `text`, or 0 when it does not start with one.
size_t utf8_sequence_length(std::string_view text) noexcept;

// JSON text from an agent as nlohmann-json can parse it, saying what it said: every byte
// sequence that is not UTF-8 becomes U+FFFD, and so does a \u escape of an unpaired UTF-16
// surrogate (Python's json.dumps writes "\udcff" for an undecodable byte), which nlohmann-json
// refuses as well. Everything else is kept byte for byte. Linear.
std::string sanitize_json_text(std::string_view text);

// `v` as the integer type T; throws json::type_error when `v` is not an integer and
// json::out_of_range when T cannot hold it. nlohmann's get<int>() converts a double with
// static_cast (undefined behaviour for 1e300) and wraps -5 into 2^64 - 5 for uint64_t: a
// hostile record must be rejected, not misread.
template <class T>
T checked_integer(const json& v) {
  if (!v.is_number_integer()) {
    throw json::type_error::create(
        302, std::string("type must be an integer, but is ") + v.type_name(), &v);
  }
  bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<uint64_t>())
                                     : std::in_range<T>(v.get<int64_t>());
  if (!fits) throw json::out_of_range::create(406, "integer out of range: " + v.dump(), &v);
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>())
                                : static_cast<T>(v.get<int64_t>());
}

}  // namespace base
}  // namespace evalbox
