// Depth and encoding checks for JSON from agents and files (see json_checks.h).
#include "base/json_checks.h"

namespace evalbox {
inline namespace base {

bool json_too_deep(std::string_view text, size_t limit) noexcept {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

size_t utf8_sequence_length(std::string_view text) noexcept {
  if (text.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < n || b(1) < lo || b(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  return n;
}

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The value of the \uXXXX escape at `text` (which starts with the backslash), or -1.
int escaped_unit(std::string_view text) noexcept {
  if (text.size() < 6 || text[0] != '\\' || text[1] != 'u') return -1;
  int v = 0;
  for (size_t i = 2; i < 6; ++i) {
    const char c = text[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

std::string sanitize_json_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      const size_t n = utf8_sequence_length(text.substr(i));
      if (n == 0) {
        out += replacement;
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    if (!in_string) {
      in_string = c == '"';
      out += c;
      ++i;
      continue;
    }
    if (c == '"') {
      in_string = false;
    } else if (c == '\\' && i + 1 < text.size()) {
      const int unit = escaped_unit(text.substr(i));
      if (unit >= 0xD800 && unit <= 0xDBFF) {
        const int low = escaped_unit(text.substr(i + 6));
        if (low >= 0xDC00 && low <= 0xDFFF) {  // a pair: one character, kept
          out.append(text.substr(i, 12));
          i += 12;
        } else {
          out += "\\ufffd";
          i += 6;
        }
        continue;
      }
      if (unit >= 0xDC00 && unit <= 0xDFFF) {
        out += "\\ufffd";
        i += 6;
        continue;
      }
      out += c;  // the backslash, and the character it escapes unless that is not ASCII
      ++i;
      if (static_cast<unsigned char>(text[i]) < 0x80) out += text[i++];
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace base
}  // namespace evalbox
