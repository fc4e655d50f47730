// Validation of a session_request: every rule that can reject a request is checked here,
// before the preparer creates anything on disk. Each error says what is wrong, why it is
// refused and what to do instead (error_kind invalid_argument, permission or expired).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "sandbox/spec/request.h"
#include "sandbox/spec/system_paths.h"

namespace evalbox::sandbox {
inline namespace spec {

// Accepted ranges of resource_limits (inclusive). Zero is never a limit; beyond the upper
// bound a value is a unit mistake (bytes given as KiB, ms as µs), not a real wish.
struct limit_bounds {
  static constexpr uint64_t cpu_ms_min = 100, cpu_ms_max = 7ull * 24 * 3600 * 1000;
  static constexpr uint64_t memory_min = 16ull << 20, memory_max = 1ull << 40;
  static constexpr uint64_t pids_min = 8, pids_max = 1'000'000;
  static constexpr uint64_t wall_ms_min = 1000, wall_ms_max = 7ull * 24 * 3600 * 1000;
  static constexpr uint64_t disk_min = 1ull << 20, disk_max = 1ull << 40;
  static constexpr uint64_t output_min = 1ull << 10, output_max = 16ull << 30;
};

// A credential source larger than this is not a credential.
constexpr uint64_t max_credential_bytes = 1u << 20;
// The most runs one credential may be leased to at once (secret_mount::max_concurrent): each
// holder locks one slot file of the lease.
constexpr int max_credential_holders = 256;

struct validation_context {
  std::filesystem::path state_root;  // protected (runs, leases); never a source
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

// Every protected root of a request: its own, each credential source, the state root and
// <state>/credential-leases.
std::vector<std::filesystem::path> protected_roots(const session_request& request,
                                                   const std::filesystem::path& state_root);

// Checks the whole request; the first violation is returned. Reads the host (stat, realpath,
// bundle digests) but writes nothing.
status validate(const session_request& request, const validation_context& context);

// The syntax rules alone (no filesystem access), also used by tools that build requests.
bool valid_run_id(std::string_view run_id) noexcept;
bool valid_handle(std::string_view handle) noexcept;
// "host:port" / "[v6]:port" with port 1..65535.
bool valid_allow_entry(std::string_view entry) noexcept;

}  // namespace spec
}  // namespace evalbox::sandbox
