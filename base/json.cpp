// Canonical JSON and non-throwing parsing.
#include "base/json.h"

#include "base/fs.h"
#include "base/json_checks.h"
#include "base/json_get.h"

namespace evalbox {
inline namespace base {

std::string canonical_json(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string pretty_json(const json& value) {
  return value.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

// Also refuses JSON nested deeper than max_json_depth (json_checks.h): callers copy and dump
// what they parse, which recurses once per level.
result<json> parse_json(std::string_view text, std::string_view what) {
  if (json_too_deep(text)) {
    return make_error(error_kind::invalid_argument,
                      "{}: invalid JSON: nested deeper than {} levels", what, max_json_depth);
  }
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Parse again with exceptions only to learn where it broke.
    try {
      json ignored = json::parse(text.begin(), text.end());
      (void)ignored;
    } catch (const json::exception& e) {
      return make_error(error_kind::invalid_argument, "{}: invalid JSON: {}", what, e.what());
    }
    return make_error(error_kind::invalid_argument, "{}: invalid JSON", what);
  }
  return value;
}

result<json> read_json_file(const std::filesystem::path& path) {
  std::string text = EB_TRY(read_file(path));
  return parse_json(text, path.string());
}

// ---- json_get.h -------------------------------------------------------------------------------

const json& json_member(const json& j, std::string_view key) noexcept {
  static const json null_value;
  if (!j.is_object()) return null_value;
  auto it = j.find(key);
  return it == j.end() ? null_value : *it;
}

namespace json_detail {

std::unexpected<error> missing(std::string_view key) {
  return make_error(error_kind::invalid_argument, "missing field '{}'", key);
}

std::unexpected<error> refused(std::string_view key, const json& v, std::string_view wanted,
                               refusal why) {
  if (why == refusal::range)
    return make_error(error_kind::invalid_argument, "field '{}' is out of range: {}", key,
                      v.dump(-1, ' ', false, json::error_handler_t::replace));
  return make_error(error_kind::invalid_argument, "field '{}' is {} {}, not {}", key,
                    v.is_array() || v.is_object() ? "an" : "a", v.type_name(), wanted);
}

}  // namespace json_detail

}  // namespace base
}  // namespace evalbox
