// Fixture patterns on RE2 (see pattern.h).
#include "harness/config/pattern.h"

#include <re2/re2.h>

namespace evalbox::harness {
inline namespace config {

namespace {

// Multi-line mode: `^` and `$` at line boundaries, as grep (and a fixture author writing
// `^hello, world$` for a file holding "hello, world\n") expects. RE2 offers it only as a flag
// in the pattern outside POSIX syntax.
constexpr std::string_view multi_line = "(?m)";

RE2::Options options() {
  RE2::Options o;
  o.set_log_errors(false);  // RE2 would print to stderr; the loader reports with file:line:col
  o.set_max_mem(pattern::max_memory_bytes);
  o.set_encoding(RE2::Options::EncodingUTF8);
  return o;
}

// RE2 quotes the part of the pattern it stopped at; for an unbalanced parenthesis that is the
// whole pattern, the flag prefix included, which says nothing about where.
pattern_problem problem_of(const RE2& re, std::string_view source) {
  std::string what = re.error();
  std::string arg = re.error_arg();
  if (std::string_view(arg).starts_with(multi_line)) {
    arg.erase(0, multi_line.size());
    if (auto at = what.find(std::string(multi_line)); at != std::string::npos)
      what.erase(at, multi_line.size());
  }
  pattern_problem p{what, std::nullopt};
  if (re.error_code() == RE2::ErrorTrailingBackslash) {
    p.offset = source.empty() ? 0 : source.size() - 1;
  } else if (!arg.empty() && arg != source) {
    if (auto at = source.find(arg); at != std::string_view::npos) p.offset = at;
  }
  return p;
}

}  // namespace

std::string pattern_problem::hint() const {
  if (what.starts_with("invalid escape sequence: \\") && what.size() > 26 && what[26] >= '1' &&
      what[26] <= '9')
    return "RE2 has no backreferences; match the text itself, or use a shell check";
  if (what.starts_with("invalid perl operator: (?=") ||
      what.starts_with("invalid perl operator: (?!") ||
      what.starts_with("invalid perl operator: (?<"))
    return "RE2 has no lookahead or lookbehind; match the text itself, or use a shell check";
  if (what.starts_with("pattern too large"))
    return "simplify the pattern: it needs more memory than evalbox gives one pattern";
  return "the syntax is RE2's (https://github.com/google/re2/wiki/Syntax); escape special "
         "characters like ( [ . * with \\";
}

std::expected<pattern, pattern_problem> pattern::compile(std::string_view source) {
  std::string full(multi_line);
  full.append(source);
  auto re = std::make_shared<const RE2>(full, options());
  if (!re->ok()) return std::unexpected(problem_of(*re, source));
  pattern p;
  p.re_ = std::move(re);
  p.source_ = std::string(source);
  return p;
}

result<bool> pattern::search(std::string_view text) const {
  if (!re_)
    return make_error(error_kind::internal, "the pattern /{}/ was not compiled when loaded",
                      source_);
  // No submatches asked for: RE2 answers with its DFA alone, one pass over the text.
  return re_->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::UNANCHORED,
                    nullptr, 0);
}

}  // namespace config
}  // namespace evalbox::harness
