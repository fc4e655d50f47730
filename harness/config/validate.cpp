// Checks of single configuration values (see validate.h).
#include "harness/config/validate.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "sandbox/image/reference.h"

namespace evalbox::harness {
inline namespace config {

bool is_valid_id(std::string_view id, bool allow_upper) noexcept {
  if (id.empty() || id.size() > 128) return false;
  for (size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              (allow_upper && c >= 'A' && c <= 'Z') ||
              (i > 0 && (c == '.' || c == '_' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

bool is_env_name(std::string_view s) noexcept {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string host_port_problem(std::string_view s) {
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return "is not host:port";
  std::string_view host = s.substr(0, colon), port = s.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value < 1 ||
      value > 65535)
    return fmt::format("has port '{}', not a number in 1..65535", port);
  if (host.front() == '[') {
    if (host.back() != ']' || host.size() < 3) return "has an unterminated [IPv6] host";
    return {};
  }
  if (host.starts_with("*.")) host.remove_prefix(2);
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-';
    if (!ok)
      return fmt::format("has host '{}' with a character other than letters, digits, '.', '-'",
                         s.substr(0, colon));
  }
  if (host.empty() || host.front() == '.' || host.back() == '.')
    return fmt::format("has an invalid host '{}'", s.substr(0, colon));
  return {};
}

namespace {
constexpr std::string_view image_transports[] = {"oci", "oci-archive", "docker-archive", "rootfs"};
}

std::string image_reference_problem(std::string_view ref) {
  if (ref.starts_with("docker://")) {
    auto parsed = sandbox::image::parse_registry_reference(ref);
    return parsed ? std::string() : parsed.error().message;
  }
  auto colon = ref.find(':');
  std::string_view transport = colon == std::string_view::npos ? ref : ref.substr(0, colon);
  if (colon == std::string_view::npos ||
      std::find(std::begin(image_transports), std::end(image_transports), transport) ==
          std::end(image_transports))
    return sandbox::image::parse_registry_reference(ref)
               ? fmt::format(
                     "'{}' names no image transport evalbox reads; a registry image is "
                     "written docker://{}",
                     ref, ref)
               : fmt::format("'{}' names no image transport evalbox reads", ref);
  if (image_reference_path(ref).empty()) return fmt::format("'{}' has no path", ref);
  if (transport == "rootfs" && ref.find(':', colon + 1) != std::string_view::npos)
    return fmt::format("'{}': rootfs: takes a directory and no tag", ref);
  return {};
}

std::string image_reference_path(std::string_view ref) {
  if (ref.starts_with("docker://")) return {};
  auto colon = ref.find(':');
  if (colon == std::string_view::npos) return {};
  std::string_view rest = ref.substr(colon + 1);
  return std::string(rest.substr(0, rest.find(':')));
}

std::string resolve_image_reference(std::string_view ref, const std::filesystem::path& base_dir) {
  if (ref.starts_with("docker://")) {
    auto parsed = sandbox::image::parse_registry_reference(ref);
    return parsed ? parsed->str() : std::string(ref);
  }
  auto colon = ref.find(':');
  std::string_view rest = ref.substr(colon + 1);
  auto end = rest.find(':');
  std::filesystem::path path(std::string(rest.substr(0, end)));
  path = expand_home(path.string());
  if (!path.is_absolute()) path = base_dir / path;
  std::string out = std::string(ref.substr(0, colon + 1)) + path.lexically_normal().string();
  if (end != std::string_view::npos) out += rest.substr(end);
  return out;
}

std::string expand_home(std::string_view path) {
  if (path == "~" || path.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    return std::string(home ? home : "") + std::string(path.substr(1));
  }
  return std::string(path);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string_view closest(std::string_view word, std::span<const std::string_view> choices) {
  std::string_view best;
  size_t best_d = 3;
  for (auto choice : choices) {
    size_t d = edit_distance(word, choice);
    if (d < best_d) {
      best_d = d;
      best = choice;
    }
  }
  return best;
}

}  // namespace config
}  // namespace evalbox::harness
