// Human units for limits: sizes ("512MiB", "2GiB", "1G", "4096") and durations ("10m",
// "90s", "1h30m", "250ms"). Used by the CLI and by harness/config; both parse the same way.
// And how long a step took, in the milliseconds records report.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace evalbox {
inline namespace base {

// Bytes. Suffixes: B, K/KB (1000), KiB (1024), M/MB, MiB, G/GB, GiB, T/TB, TiB; none = bytes.
result<uint64_t> parse_bytes(std::string_view text);
// Milliseconds. Units: ms, s, m, h, d, concatenated ("1h30m"); a bare number is seconds.
result<uint64_t> parse_duration_ms(std::string_view text);

std::string format_bytes(uint64_t bytes);     // "2GiB", "1.5MiB", "512B"
std::string format_duration_ms(uint64_t ms);  // "10m", "1h30m", "250ms"
// Unix seconds as local time to the minute, "2026-12-07 08:30"; "never" for 0 or less (a
// listing's "last used" or "warmed").
std::string format_local_minute(int64_t unix_seconds);

// Whole milliseconds from `t0` to now (a duration to report: run.json, replies, logs).
uint64_t ms_since(std::chrono::steady_clock::time_point t0) noexcept;

}  // namespace base
}  // namespace evalbox
