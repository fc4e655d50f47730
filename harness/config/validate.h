// Checks of single values written in fixture and suite files, apart from YAML so that the
// layers above can use them too: ids, host:port entries, environment variable names, `~` in
// paths, and the "did you mean" suggestion for a misspelled key.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace evalbox::harness {
inline namespace config {

// A fixture, candidate or check id: [a-z0-9][a-z0-9._-]*, at most 128 characters;
// `allow_upper` also allows A-Z (suite names, credential handles, check ids).
bool is_valid_id(std::string_view id, bool allow_upper = false) noexcept;

// An environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool is_env_name(std::string_view s) noexcept;

// host:port with port 1..65535; host is a DNS name, "*.name", an IPv4 address or [IPv6].
// Returns "" when valid, else what is wrong ("is not host:port", "has port 'x', ...").
std::string host_port_problem(std::string_view s);

// An image reference as a fixture or suite writes it: "" when it names a transport evalbox reads
// (oci:, oci-archive:, docker-archive:, rootfs:) and a path, or a registry image
// (docker://NAME[:TAG][@DIGEST], checked as Docker names images), else what is wrong. The path
// is checked where it is resolved (harness/fixture), the image itself when it is imported.
std::string image_reference_problem(std::string_view ref);
// `ref` with its path made absolute against `base_dir` (lexically normalized); the path ends at
// the first ':' after the transport, as in skopeo. A docker:// reference is normalized
// (docker://python:3.13 -> docker://docker.io/library/python:3.13). Call only when
// image_reference_problem is "".
std::string resolve_image_reference(std::string_view ref, const std::filesystem::path& base_dir);
// The path part of a reference ("oci:images/py:3.13" -> "images/py"); "" for docker://.
std::string image_reference_path(std::string_view ref);

// `~` or `~/...` expanded with $HOME; anything else as it is.
std::string expand_home(std::string_view path);

// The Levenshtein distance between two words.
size_t edit_distance(std::string_view a, std::string_view b);
// The choice nearest to `word`, when one is fewer than 3 edits away; else "".
std::string_view closest(std::string_view word, std::span<const std::string_view> choices);

}  // namespace config
}  // namespace evalbox::harness
