// Image reference parsing (see reference.h).
#include "sandbox/image/reference.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "base/digest.h"
#include "base/fs.h"

namespace evalbox::sandbox::image {

namespace fs = std::filesystem;

namespace {

constexpr std::array<std::pair<std::string_view, transport>, 5> transports{{
    {"oci:", transport::oci},
    {"oci-archive:", transport::oci_archive},
    {"docker-archive:", transport::docker_archive},
    {"rootfs:", transport::rootfs},
    {"docker://", transport::docker},
}};

constexpr std::string_view accepted_forms =
    "expected oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE[:NAME:TAG], "
    "rootfs:DIR or docker://NAME[:TAG][@sha256:HEX]";

constexpr std::string_view default_domain = "docker.io";

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A path component of a repository: lowercase letters and digits, separated by one '.', one
// or two '_', or any number of '-' (Docker's grammar).
bool valid_component(std::string_view c) {
  if (c.empty() || !lower_alnum(c.front()) || !lower_alnum(c.back())) return false;
  for (size_t i = 0; i < c.size();) {
    if (lower_alnum(c[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < c.size() && !lower_alnum(c[j])) ++j;
    std::string_view sep = c.substr(i, j - i);
    const bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

// host[:port]: DNS labels of letters, digits and '-', dot-separated; a port of digits.
bool valid_domain(std::string_view d) {
  std::string_view host = d;
  if (auto colon = d.find(':'); colon != std::string_view::npos) {
    std::string_view port = d.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos)
      return false;
    host = d.substr(0, colon);
  }
  if (host.empty()) return false;
  size_t start = 0;
  while (start <= host.size()) {
    size_t dot = host.find('.', start);
    std::string_view label =
        host.substr(start, dot == std::string_view::npos ? host.npos : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

bool valid_docker_tag(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!word(t.front())) return false;
  for (char c : t)
    if (!(word(c) || c == '.' || c == '-')) return false;
  return true;
}

// NAME[:TAG][@DIGEST] without the transport, into `ref`'s docker fields.
status parse_docker_name(std::string_view text, std::string_view whole,
                         const std::vector<std::pair<std::string, std::string>>& aliases,
                         reference& ref) {
  auto bad = [&](std::string_view why) {
    return make_error(error_kind::invalid_argument, "image reference '{}': {}",
                      whole.substr(0, 300), why);
  };
  if (text.empty()) return bad("no image name (e.g. docker://python:3.13)");
  for (char c : text)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return bad("a space or control character in the name");
  std::string_view name = text;
  if (auto at = name.find('@'); at != std::string_view::npos) {
    std::string_view digest = name.substr(at + 1);
    name = name.substr(0, at);
    if (!digest.starts_with("sha256:") || !is_sha256_hex(digest.substr(7)))
      return bad("a digest is sha256: and 64 lowercase hex digits");
    ref.digest = std::string(digest);
  }
  const size_t last_slash = name.rfind('/');
  if (auto colon = name.rfind(':'); colon != std::string_view::npos &&
                                    (last_slash == std::string_view::npos || colon > last_slash)) {
    std::string_view tag = name.substr(colon + 1);
    name = name.substr(0, colon);
    if (!valid_docker_tag(tag))
      return bad(
          fmt::format("'{}' is not a valid tag (letters, digits, _ . -; at most 128, "
                      "not starting with . or -)",
                      tag.substr(0, 130)));
    ref.tag = std::string(tag);
  }
  std::string full(name);
  for (const auto& [alias, target] : aliases)
    if (alias == name) full = target;
  std::string_view rest = full;
  const size_t slash = rest.find('/');
  std::string_view first = rest.substr(0, slash);
  const bool has_domain =
      slash != std::string_view::npos &&
      (first.find_first_of(".:") != std::string_view::npos || first == "localhost" ||
       std::any_of(first.begin(), first.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
  if (has_domain) {
    if (!valid_domain(first)) return bad(fmt::format("'{}' is not a valid registry host", first));
    ref.domain = std::string(first);
    rest.remove_prefix(slash + 1);
  } else {
    ref.domain = std::string(default_domain);
  }
  if (ref.domain == "index.docker.io" || ref.domain == "registry-1.docker.io")
    ref.domain = std::string(default_domain);
  if (rest.empty()) return bad("no repository after the registry host");
  size_t start = 0;
  while (start <= rest.size()) {
    size_t next = rest.find('/', start);
    std::string_view comp =
        rest.substr(start, next == std::string_view::npos ? rest.npos : next - start);
    if (!valid_component(comp)) {
      if (std::any_of(comp.begin(), comp.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
        return bad("a repository name must be lowercase");
      return bad(
          fmt::format("'{}' is not a valid repository component (lowercase letters, "
                      "digits, separated by . _ __ or -)",
                      comp.substr(0, 100)));
    }
    if (next == std::string_view::npos) break;
    start = next + 1;
  }
  ref.repository = std::string(rest);
  if (ref.domain == default_domain && ref.repository.find('/') == std::string::npos)
    ref.repository = "library/" + ref.repository;
  if (ref.domain.size() + 1 + ref.repository.size() > 255)
    return bad("the name is longer than 255 characters");
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return {};
}

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
  if (kind == transport::docker) {
    std::string out = "docker://" + name();
    if (!tag.empty()) out += ":" + tag;
    if (!digest.empty()) out += "@" + digest;
    return out;
  }
  std::string out = fmt::format("{}:{}", to_string(kind), path.string());
  if (!tag.empty()) out += ":" + tag;
  return out;
}

std::string reference::pinned(std::string_view manifest_digest) const {
  return fmt::format("docker://{}@{}", name(), manifest_digest);
}

result<reference> parse_registry_reference(
    std::string_view text, const std::vector<std::pair<std::string, std::string>>& aliases) {
  reference ref;
  ref.kind = transport::docker;
  std::string_view name = text;
  if (name.starts_with("docker://")) name.remove_prefix(9);
  EB_TRY(parse_docker_name(name, text, aliases, ref));
  return ref;
}

result<reference> parse_reference(std::string_view text, const fs::path& base_dir) {
  if (text.starts_with("docker://")) return parse_registry_reference(text);
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
