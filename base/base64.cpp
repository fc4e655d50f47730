// Base64 encoding and strict decoding (base64.h).
#include "base/base64.h"

#include <array>
#include <cstdint>

namespace evalbox {
namespace {

constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The value of each byte in the alphabet, or -1.
constexpr std::array<int8_t, 256> values = [] {
  std::array<int8_t, 256> v{};
  v.fill(-1);
  for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
  return v;
}();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
    out += alphabet[n >> 18 & 63];
    out += alphabet[n >> 12 & 63];
    out += alphabet[n >> 6 & 63];
    out += alphabet[n & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    const uint32_t n = at(i) << 16 | (rest == 2 ? at(i + 1) << 8 : 0);
    out += alphabet[n >> 18 & 63];
    out += alphabet[n >> 12 & 63];
    out += rest == 2 ? alphabet[n >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

result<std::string> base64_decode(std::string_view text) {
  auto bad = [] { return make_error(error_kind::invalid_argument, "not valid base64"); };
  if (text.size() % 4 != 0) return bad();
  size_t pads = 0;
  while (pads < 2 && pads < text.size() && text[text.size() - 1 - pads] == '=') ++pads;
  const std::string_view data = text.substr(0, text.size() - pads);
  std::string out;
  out.reserve(data.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : data) {
    const int8_t v = values[static_cast<unsigned char>(c)];
    if (v < 0) return bad();  // '=' inside, or outside the alphabet
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xff);
    }
  }
  // The bits left over must be zero padding ("QR==" is not the canonical "QQ==").
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return bad();
  return out;
}

}  // namespace evalbox
