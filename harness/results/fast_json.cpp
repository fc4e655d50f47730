// sax_parse_fast (see fast_json.h): RapidJSON's SAX reader, its events handed on as nlohmann's.
//
// What is nlohmann's by construction, whatever RapidJSON does:
//   - numbers: RapidJSON only checks their grammar and hands over their text
//     (kParseNumbersAsStringsFlag); they are converted here the way nlohmann's lexer converts
//     them (strtoull / strtoll, else strtod with the locale's decimal point; not finite: an
//     error), so an accepted number has the same type and value;
//   - what a SAX refuses stops the parse, as in nlohmann.
// What is declined and left to nlohmann, because the lexers could differ there: any \u escape
// (surrogate pairs), any NUL byte (RapidJSON's streams end at one), nesting deeper than
// max_json_depth (RapidJSON's parser recurses), and every error (a byte-order mark, which
// nlohmann skips, among them). The rest of the grammar — structure,
// literals, escapes, whitespace, UTF-8 validity (kParseValidateEncodingFlag), nothing after
// the value — is JSON's, which both implement; the differential fuzz target
// (tests/fuzz/fast_json_fuzz.cpp) and tests/harness/results/fast_json_test.cpp hold them to it.
#include "harness/results/fast_json.h"

#include "base/json_checks.h"

#include <rapidjson/error/error.h>
#include <rapidjson/reader.h>

#include <cerrno>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace evalbox::harness {
inline namespace results {

namespace {

using sax_t = nlohmann::json_sax<json>;

class to_nlohmann {
 public:
  explicit to_nlohmann(sax_t& sax) : sax_(sax) {}

  // RapidJSON's Handler concept names these members (rapidjson/reader.h).
  // NOLINTBEGIN(readability-identifier-naming)
  bool Null() { return sax_.null(); }
  bool Bool(bool b) { return sax_.boolean(b); }
  // Numbers come as text only (kParseNumbersAsStringsFlag).
  bool Int(int) { return false; }
  bool Uint(unsigned) { return false; }
  bool Int64(int64_t) { return false; }
  bool Uint64(uint64_t) { return false; }
  bool Double(double) { return false; }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) { return number(s, n); }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    text_.assign(s, n);
    return sax_.string(text_);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    text_.assign(s, n);
    return sax_.key(text_);
  }
  // Deeper than any record: declined (nlohmann, which parses iteratively, decides).
  bool StartObject() {
    return ++depth_ <= max_json_depth && sax_.start_object(static_cast<std::size_t>(-1));
  }
  bool EndObject(rapidjson::SizeType) {
    --depth_;
    return sax_.end_object();
  }
  bool StartArray() {
    return ++depth_ <= max_json_depth && sax_.start_array(static_cast<std::size_t>(-1));
  }
  bool EndArray(rapidjson::SizeType) {
    --depth_;
    return sax_.end_array();
  }
  // NOLINTEND(readability-identifier-naming)

 private:
  // nlohmann's lexer (scan_number): a number without fraction or exponent is tried as an
  // unsigned (no sign) or signed 64-bit integer; one that does not fit, and every other
  // number, is a double from strtod, whose decimal point is the locale's; the parser refuses a
  // double that is not finite.
  bool number(const char* s, size_t n) {
    text_.assign(s, n);
    const bool integral = text_.find_first_of(".eE") == std::string::npos;
    char* end = nullptr;
    errno = 0;
    if (integral && text_[0] != '-') {
      const unsigned long long x = std::strtoull(text_.c_str(), &end, 10);
      if (errno == 0 && static_cast<uint64_t>(x) == x)
        return sax_.number_unsigned(static_cast<uint64_t>(x));
    } else if (integral) {
      const long long x = std::strtoll(text_.c_str(), &end, 10);
      if (errno == 0 && static_cast<int64_t>(x) == x)
        return sax_.number_integer(static_cast<int64_t>(x));
    }
    const char point = *std::localeconv()->decimal_point;
    if (point != '.' && point != '\0')
      if (size_t dot = text_.find('.'); dot != std::string::npos) text_[dot] = point;
    const double d = std::strtod(text_.c_str(), &end);
    if (end != text_.c_str() + text_.size() || !std::isfinite(d)) return false;
    return sax_.number_float(d, text_);
  }

  sax_t& sax_;
  size_t depth_ = 0;
  std::string text_;  // the string, key or number being handed on
};

// What nlohmann decodes in its own way, or what RapidJSON's streams cannot carry.
bool declined(std::string_view text) {
  if (std::memchr(text.data(), '\0', text.size())) return true;
  for (size_t at = text.find('\\'); at != std::string_view::npos; at = text.find('\\', at + 2))
    if (at + 1 < text.size() && text[at + 1] == 'u') return true;
  return false;
}

// ASCII only: then there is no UTF-8 to validate (most records are).
bool ascii(std::string_view text) {
  uint64_t high = 0;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + i, 8);
    high |= word;
  }
  for (; i < text.size(); ++i) high |= static_cast<unsigned char>(text[i]);
  return (high & 0x8080808080808080ull) == 0;
}

template <unsigned Flags>
bool parse(std::string_view text, sax_t& sax) {
  // Parsed in place (kParseInsituFlag), from a copy kept per thread: strings and numbers are
  // handed on from the copy, so RapidJSON's own stack is never used (its first use computes an
  // offset from a null pointer, which UBSan rightly reports). The recursion this leaves is
  // bounded by the handler (max_json_depth).
  thread_local std::string copy;
  copy.assign(text);  // NUL-terminated: the end of the text (there is no NUL inside)
  // RapidJSON's UTF-8 validation takes all the continuation bytes a lead byte announces
  // before it judges them: a text that ends inside a sequence ("\xF3) would make it read up
  // to three bytes past the terminating NUL. Three more NULs keep those reads in the copy.
  copy.append(3, '\0');
  rapidjson::InsituStringStream in(copy.data());
  rapidjson::Reader reader;
  to_nlohmann handler(sax);
  // A line of megabytes is not kept for the rest of the thread's life.
  struct release {
    ~release() {
      if (copy.capacity() > (1u << 20)) std::string().swap(copy);
    }
  } released;
  return !reader
              .Parse<Flags | rapidjson::kParseInsituFlag | rapidjson::kParseNumbersAsStringsFlag>(
                  in, handler)
              .IsError();
}

}  // namespace

bool sax_parse_fast(std::string_view text, sax_t& sax) {
  if (declined(text)) return false;
  return ascii(text) ? parse<0>(text, sax)
                     : parse<rapidjson::kParseValidateEncodingFlag>(text, sax);
}

}  // namespace results
}  // namespace evalbox::harness
