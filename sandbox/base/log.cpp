// Leveled stderr logging with secret redaction.
#include "sandbox/base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace evalbox::log {

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

void init_from_env() noexcept {
  const char* v = std::getenv("EVALBOX_LOG");
  if (!v) return;
  std::string_view s = v;
  if (s == "debug")
    set_level(level::debug);
  else if (s == "info")
    set_level(level::info);
  else if (s == "warn")
    set_level(level::warn);
  else if (s == "error")
    set_level(level::error);
  else if (s == "off")
    set_level(level::off);
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
  static constexpr std::string_view kNames[] = {"debug", "info", "warn", "error"};
  std::string line =
      fmt::format("evalbox: {}: {}\n", kNames[static_cast<int>(lvl)], scrub(message));
  std::lock_guard lock(g_mutex);
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace evalbox::log
