// Records the SAX events a JSON lexer sends, as text, so that two lexers' answers for the same
// input can be compared exactly (a number's type and bits included). Used by fast_json_test
// and the fast_json fuzz target.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/json.h"
#include "harness/results/fast_json.h"

namespace evalbox::testing {

class sax_events : public nlohmann::json_sax<json> {
 public:
  std::vector<std::string> events;

  bool null() override { return add("null"); }
  bool boolean(bool v) override { return add(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return add(fmt::format("int {}", v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(fmt::format("uint {}", v)); }
  bool number_float(number_float_t v, const string_t&) override {
    return add(fmt::format("double {:016x}", std::bit_cast<uint64_t>(v)));
  }
  bool binary(binary_t&) override { return add("binary"); }
  bool string(string_t& v) override { return add("string " + v); }
  bool key(string_t& v) override { return add("key " + v); }
  bool start_object(std::size_t n) override { return add(fmt::format("{{ {}", n)); }
  bool end_object() override { return add("}"); }
  bool start_array(std::size_t n) override { return add(fmt::format("[ {}", n)); }
  bool end_array() override { return add("]"); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool add(std::string e) {
    events.push_back(std::move(e));
    return true;
  }
};

// Both lexers' answers for `text`: accepted or not, and the events of an accepted text.
struct lexed {
  bool accepted = false;
  std::vector<std::string> events;
};

inline lexed lex_nlohmann(std::string_view text) {
  sax_events sax;
  lexed out;
  out.accepted = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json,
                                 /*strict=*/true);
  if (out.accepted) out.events = std::move(sax.events);
  return out;
}

inline lexed lex_fast(std::string_view text) {
  sax_events sax;
  lexed out;
  out.accepted = harness::sax_parse_fast(text, sax);
  if (out.accepted) out.events = std::move(sax.events);
  return out;
}

}  // namespace evalbox::testing
