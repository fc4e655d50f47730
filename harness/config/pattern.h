// A regular expression of a fixture check (file `matches`, transcript `command_matches`,
// `final_message_matches`, `forbid_command`), compiled once when the fixture loads and searched
// in agent-written text at grading time.
//
// The engine is RE2: matching time is linear in the text, memory is bounded (max_memory_bytes
// below) and nothing recurses per input character, so no file or message an agent writes can
// crash or stall grading (std::regex recursed once per character and overflowed the stack on a
// megabyte of "abab...c"). The syntax is RE2's, close to Perl's without backreferences or
// lookaround (docs/fixture-format.md). `^` and `$` match at line boundaries, as in grep: every
// pattern is compiled in RE2's multi-line mode, `(?m)`. re2.h stays in pattern.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace re2 {
class RE2;  // NOLINT(readability-identifier-naming): RE2's own name
}  // namespace re2

namespace evalbox::harness {
inline namespace config {

// Why a pattern does not compile: RE2's message, and where in the pattern the problem starts
// (a byte offset) when it can be told.
struct pattern_problem {
  std::string what;                        // e.g. "missing ): (a|b"
  std::optional<size_t> offset;            // into the pattern as written
  [[nodiscard]] std::string hint() const;  // what to do about it
};

class pattern {
 public:
  // The memory one pattern may use for its compiled program and its matching caches. A
  // pattern that needs more does not compile (a configuration error); a search that fills
  // the caches falls back to RE2's slower, still linear and bounded, NFA.
  static constexpr int64_t max_memory_bytes = 32ll << 20;

  // Not compiled: search() is an error. check_spec holds one until the loader compiles it.
  pattern() = default;

  // Compiles `source` (RE2 syntax) in multi-line mode.
  static std::expected<pattern, pattern_problem> compile(std::string_view source);

  [[nodiscard]] bool compiled() const noexcept { return re_ != nullptr; }
  // The pattern as written (without the `(?m)` evalbox adds).
  [[nodiscard]] const std::string& source() const noexcept { return source_; }

  // True when the pattern matches somewhere in `text` (unanchored). Any bytes: invalid UTF-8
  // is matched by nothing but itself. An error only when the pattern was never compiled.
  [[nodiscard]] result<bool> search(std::string_view text) const;

  // Equal when written the same (specs compare by what the user wrote).
  friend bool operator==(const pattern& a, const pattern& b) { return a.source_ == b.source_; }

 private:
  std::shared_ptr<const re2::RE2> re_;  // immutable, shared by copies and threads
  std::string source_;
};

}  // namespace config
}  // namespace evalbox::harness
