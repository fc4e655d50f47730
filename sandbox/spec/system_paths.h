// The paths every sandbox has: its workspace and managed home, and the host directories every
// sandbox sees read-only at the same path, what any program needs to run (the loader,
// libraries, binaries). One list for the three places that must agree on it: validate
// (argv[0]'s directory there needs no check of its own: it is visible anyway), the preparer (no
// extra bind for a path below one of them) and the helper, which mounts them (a symlink such as
// Debian's /bin -> usr/bin is recreated; a missing one is skipped).
#pragma once

#include <array>
#include <filesystem>
#include <string_view>

namespace evalbox::sandbox {
inline namespace spec {

// Where every sandbox sees its two writable trees: the workspace and the managed home.
inline constexpr const char* sandbox_workspace = "/workspace";
inline constexpr const char* sandbox_home = "/home/agent";

// In mount order.
inline constexpr std::array<std::string_view, 7> system_paths = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// True when `path` is one of system_paths or lies below one, lexically.
bool below_system_path(const std::filesystem::path& path);

}  // namespace spec
}  // namespace evalbox::sandbox
