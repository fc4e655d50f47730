// JSON for evalbox records and plans: nlohmann-json, with a canonical form (sorted keys, no
// spaces) used for digests, and parsing that returns result<> instead of throwing.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_fwd.h"

namespace evalbox {
inline namespace base {

// Compact, sorted keys, UTF-8 validated: the form that digests are computed over.
std::string canonical_json(const json& value);
// Two-space indented, sorted keys, trailing newline: the form written for people and tools.
std::string pretty_json(const json& value);

result<json> parse_json(std::string_view text, std::string_view what);
result<json> read_json_file(const std::filesystem::path& path);

}  // namespace base
}  // namespace evalbox
