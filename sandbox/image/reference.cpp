// Image reference parsing (see reference.h).
#include "sandbox/image/reference.h"

#include <array>
#include <utility>

#include "base/fs.h"

namespace evalbox::sandbox::image {

namespace fs = std::filesystem;

namespace {

constexpr std::array<std::pair<std::string_view, transport>, 4> transports{{
    {"oci:", transport::oci},
    {"oci-archive:", transport::oci_archive},
    {"docker-archive:", transport::docker_archive},
    {"rootfs:", transport::rootfs},
}};

constexpr std::string_view accepted_forms =
    "expected oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:NAME:TAG] or "
    "rootfs:DIR";

// An OCI ref.name: letters, digits and . _ - : / + @ (the image-spec's grammar allows these
// separators between alphanumeric components). Anything else is a typo worth reporting.
bool valid_tag(std::string_view tag) {
  if (tag.empty() || tag.size() > 255) return false;
  for (char c : tag) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '+' || c == '@';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string_view to_string(transport t) noexcept {
  for (const auto& [prefix, kind] : transports)
    if (kind == t) return prefix.substr(0, prefix.size() - 1);
  return "oci";
}

std::string reference::str() const {
  std::string out = fmt::format("{}:{}", to_string(kind), path.string());
  if (!tag.empty()) out += ":" + tag;
  return out;
}

result<reference> parse_reference(std::string_view text, const fs::path& base_dir) {
  reference ref;
  std::string_view rest;
  bool matched = false;
  for (const auto& [prefix, kind] : transports) {
    if (text.starts_with(prefix)) {
      ref.kind = kind;
      rest = text.substr(prefix.size());
      matched = true;
      break;
    }
  }
  if (!matched)
    return make_error(error_kind::invalid_argument, "image reference '{}': unknown transport ({})",
                      text, accepted_forms);
  auto colon = rest.find(':');
  std::string_view path_text = rest.substr(0, colon);
  std::string_view tag =
      colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  if (path_text.empty())
    return make_error(error_kind::invalid_argument, "image reference '{}': no path ({})", text,
                      accepted_forms);
  if (path_text.find('\0') != std::string_view::npos)
    return make_error(error_kind::invalid_argument, "image reference '{}': NUL in path", text);
  if (colon != std::string_view::npos) {
    if (ref.kind == transport::rootfs)
      return make_error(error_kind::invalid_argument,
                        "image reference '{}': rootfs:DIR takes no tag (a path containing ':' "
                        "cannot be named)",
                        text);
    if (!valid_tag(tag))
      return make_error(error_kind::invalid_argument,
                        "image reference '{}': '{}' is not a valid tag (letters, digits and "
                        "._-:/+@, at most 255)",
                        text, tag);
    if (ref.kind == transport::docker_archive && tag.find(':') == std::string_view::npos)
      return make_error(error_kind::invalid_argument,
                        "image reference '{}': docker-archive names an image as NAME:TAG "
                        "(e.g. docker-archive:img.tar:localhost/app:latest)",
                        text);
    ref.tag = std::string(tag);
  }
  fs::path p{std::string(path_text)};
  if (p.is_relative()) {
    fs::path base = base_dir.empty() ? fs::current_path() : base_dir;
    p = base / p;
  }
  ref.path = normalize(p);
  return ref;
}

}  // namespace evalbox::sandbox::image
