// Logging for evalbox: leveled lines on stderr. Secret values (credential contents, API keys)
// are registered with redact_secret() and replaced by "<redacted>" in every line logged, so a
// secret that slips into a message or an error never reaches a log.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace evalbox {
inline namespace base {
namespace log {

enum class level { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

void set_level(level lvl) noexcept;
level current_level() noexcept;
// Reads EVALBOX_LOG (debug|info|warn|error|off); default warn.
void init_from_env() noexcept;

// Registers a secret value; it is scrubbed from all later log lines and from scrub().
// Values shorter than 6 bytes are ignored (they would redact ordinary words).
void redact_secret(std::string_view value);
// Returns `text` with every registered secret replaced by "<redacted>".
std::string scrub(std::string_view text);

void write(level lvl, std::string_view message);

template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (current_level() <= level::debug)
    write(level::debug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (current_level() <= level::info)
    write(level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (current_level() <= level::warn)
    write(level::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  if (current_level() <= level::error)
    write(level::error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace log
}  // namespace base
}  // namespace evalbox
