// Leveled stderr logging with secret redaction.
#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <vector>

namespace evalbox {
inline namespace base {
namespace log {

namespace {
std::atomic<level> g_level{level::warn};
std::mutex g_mutex;
std::vector<std::string>& secrets() {
  static std::vector<std::string> s;
  return s;
}
}  // namespace

void set_level(level lvl) noexcept { g_level.store(lvl); }
level current_level() noexcept { return g_level.load(); }

namespace {

// The level a name says (EVALBOX_LOG's values); nothing for any other text.
std::optional<level> level_named(std::string_view s) noexcept {
  if (s == "debug") return level::debug;
  if (s == "info") return level::info;
  if (s == "warn") return level::warn;
  if (s == "error") return level::error;
  if (s == "off") return level::off;
  return std::nullopt;
}

}  // namespace

// The edge's one read of EVALBOX_LOG (harness/cli/main.cpp calls it first thing); the level is
// then the process's, read by every log call. An unknown value is ignored.
void init_from_env() noexcept {
  const char* v = std::getenv("EVALBOX_LOG");
  if (!v) return;
  if (const auto l = level_named(v)) set_level(*l);
}

void redact_secret(std::string_view value) {
  if (value.size() < 6) return;
  std::lock_guard lock(g_mutex);
  for (const auto& s : secrets())
    if (s == value) return;
  secrets().emplace_back(value);
}

std::string scrub(std::string_view text) {
  std::string out(text);
  std::lock_guard lock(g_mutex);
  for (const auto& s : secrets()) {
    for (size_t pos = out.find(s); pos != std::string::npos; pos = out.find(s, pos)) {
      out.replace(pos, s.size(), "<redacted>");
      pos += 10;
    }
  }
  return out;
}

void write(level lvl, std::string_view message) {
  static constexpr std::string_view level_names[] = {"debug", "info", "warn", "error"};
  std::string line =
      fmt::format("evalbox: {}: {}\n", level_names[static_cast<int>(lvl)], scrub(message));
  std::lock_guard lock(g_mutex);
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace log
}  // namespace base
}  // namespace evalbox
