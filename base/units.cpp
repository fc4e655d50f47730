// Parsing and formatting of sizes and durations.
#include "base/units.h"

#include <cctype>
#include <charconv>
#include <ctime>
#include <limits>

namespace evalbox {
inline namespace base {

namespace {

bool parse_number(std::string_view& s, double& out) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + i, out);
  if (ec != std::errc() || ptr != s.data() + i) return false;
  s.remove_prefix(i);
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

result<uint64_t> parse_bytes(std::string_view text) {
  std::string_view s = trim(text);
  double value = 0;
  if (!parse_number(s, value))
    return make_error(error_kind::invalid_argument,
                      "'{}' is not a size (write e.g. 512MiB, 2GiB or 4096)", text);
  s = trim(s);
  struct unit {
    std::string_view name;
    double factor;
  };
  static constexpr unit units_table[] = {{"", 1},
                                         {"B", 1},
                                         {"K", 1e3},
                                         {"KB", 1e3},
                                         {"KiB", 1024.0},
                                         {"M", 1e6},
                                         {"MB", 1e6},
                                         {"MiB", 1048576.0},
                                         {"G", 1e9},
                                         {"GB", 1e9},
                                         {"GiB", 1073741824.0},
                                         {"T", 1e12},
                                         {"TB", 1e12},
                                         {"TiB", 1099511627776.0}};
  for (const auto& u : units_table) {
    if (s == u.name) {
      double bytes = value * u.factor;
      if (bytes >= static_cast<double>(std::numeric_limits<uint64_t>::max()))
        return make_error(error_kind::invalid_argument, "size '{}' is too large", text);
      return static_cast<uint64_t>(bytes);
    }
  }
  return make_error(error_kind::invalid_argument,
                    "'{}' has an unknown size unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB)",
                    text, s);
}

result<uint64_t> parse_duration_ms(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty())
    return make_error(error_kind::invalid_argument, "empty duration (write e.g. 10m or 90s)");
  double total = 0;
  bool any = false;
  while (!s.empty()) {
    double value = 0;
    if (!parse_number(s, value))
      return make_error(error_kind::invalid_argument,
                        "'{}' is not a duration (write e.g. 10m, 90s, 1h30m or 250ms)", text);
    std::string_view unit_name;
    size_t i = 0;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    unit_name = s.substr(0, i);
    s.remove_prefix(i);
    double factor;
    if (unit_name.empty()) {
      if (any || !s.empty())
        return make_error(error_kind::invalid_argument, "'{}': a number needs a unit here", text);
      factor = 1000;
    } else if (unit_name == "ms")
      factor = 1;
    else if (unit_name == "s")
      factor = 1000;
    else if (unit_name == "m" || unit_name == "min")
      factor = 60'000;
    else if (unit_name == "h")
      factor = 3'600'000;
    else if (unit_name == "d")
      factor = 86'400'000;
    else
      return make_error(error_kind::invalid_argument,
                        "'{}' has an unknown time unit '{}' (use ms, s, m, h, d)", text, unit_name);
    total += value * factor;
    any = true;
  }
  // Converting a double beyond uint64_t is undefined behaviour, not a large number.
  if (total >= static_cast<double>(std::numeric_limits<uint64_t>::max()))
    return make_error(error_kind::invalid_argument, "duration '{}' is too long", text);
  return static_cast<uint64_t>(total);
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::string_view unit_names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  if (v == static_cast<double>(static_cast<uint64_t>(v)))
    return fmt::format("{}{}", static_cast<uint64_t>(v), unit_names[i]);
  return fmt::format("{:.1f}{}", v, unit_names[i]);
}

std::string format_duration_ms(uint64_t ms) {
  if (ms == 0) return "0s";
  if (ms % 1000 != 0)
    return ms < 1000 ? fmt::format("{}ms", ms) : fmt::format("{:.3g}s", ms / 1000.0);
  uint64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) {
    out += fmt::format("{}h", s / 3600);
    s %= 3600;
  }
  if (s >= 60) {
    out += fmt::format("{}m", s / 60);
    s %= 60;
  }
  if (s > 0) out += fmt::format("{}s", s);
  return out;
}

uint64_t ms_since(std::chrono::steady_clock::time_point t0) noexcept {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

std::string format_local_minute(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "never";
  const std::time_t t = unix_seconds;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm));
}

}  // namespace base
}  // namespace evalbox
