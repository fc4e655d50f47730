// Fuzzes parse_challenge (sandbox/image/registry.cpp): a registry's 401 carries a
// WWW-Authenticate header that decides where evalbox asks for a token and with what. Any text
// is a challenge or an error; an accepted challenge has a lowercase scheme, a realm when it is
// Bearer, bounded values, and reads back the same when written out again.
#include <cctype>

#include "sandbox/image/registry.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  using namespace evalbox::sandbox::image;
  const std::string_view text = fuzz::as_text(data, size);
  auto c = parse_challenge(text);
  if (!c) {
    fuzz::check(c.error().kind == error_kind::invalid_argument, "a bad header is invalid input");
    fuzz::check(c.error().message.size() < 256, "the error does not echo the header");
    return 0;
  }
  fuzz::check(!c->scheme.empty(), "a challenge has a scheme");
  for (char ch : c->scheme)
    fuzz::check(std::islower(static_cast<unsigned char>(ch)) != 0,
                "the scheme is lowercase letters");
  fuzz::check(c->scheme != "bearer" || c->params.count("realm") == 1, "Bearer has a realm");
  std::string written = c->scheme;
  bool first = true;
  for (const auto& [k, v] : c->params) {
    fuzz::check(!k.empty(), "parameter names are not empty");
    for (char ch : k)
      fuzz::check(std::isupper(static_cast<unsigned char>(ch)) == 0 && ch != '=' && ch != ',' &&
                      ch != '"' && static_cast<unsigned char>(ch) > 0x20,
                  "parameter names are lowercase tokens");
    fuzz::check(v.size() <= 4096, "values are bounded");
    written += (first ? " " : ",") + k + "=" + quoted(v);
    first = false;
  }
  auto again = parse_challenge(written);
  fuzz::check(static_cast<bool>(again), "a challenge written out parses again");
  fuzz::check(again->scheme == c->scheme && again->params == c->params,
              "a challenge written out reads back the same");
  return 0;
}
