// Base64 (RFC 4648, the standard alphabet, padded): registry credentials (Basic auth, the auth
// files that store them) and the bytes of a session's protocol messages (docs/sessions.md).
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"

namespace evalbox {

std::string base64_encode(std::string_view bytes);
// Strict: errors on a character outside the alphabet, a length that is not a multiple of four,
// or padding anywhere but at the end (whitespace is not skipped).
result<std::string> base64_decode(std::string_view text);

}  // namespace evalbox
