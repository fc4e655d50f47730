// The error model of evalbox: result<T> = std::expected<T, error>, with a small set of kinds.
// Errors name what was attempted (`mount("/a", "/b", MS_BIND): EPERM`) and gain context on
// the way up (`prepare run 3f2a: materialize workspace: ...`). No exception crosses a layer.
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace evalbox {
inline namespace base {

enum class error_kind {
  invalid_argument,  // the request or input is wrong; the user must change it
  not_found,         // a named file, handle or resource does not exist
  permission,        // the host refuses (EPERM/EACCES) or a protected root is touched
  busy,              // exclusive resource held by someone else ("already in use")
  expired,           // an authorization or deadline has passed
  unsupported,       // the host lacks a kernel feature or filesystem capability
  io,                // a system call or I/O failed for an environmental reason
  cancelled,         // the caller asked to stop (SIGINT/SIGTERM)
  internal,          // a broken invariant of evalbox itself
};

std::string_view to_string(error_kind kind) noexcept;

struct [[nodiscard]] error {
  error_kind kind = error_kind::internal;
  std::string message;
  int sys_errno = 0;  // errno when a system call failed, else 0

  // Prepends "what: " to the message, keeping kind and errno.
  error&& with_context(std::string_view what) &&;
  error& with_context(std::string_view what) &;
};

template <class T>
using result = std::expected<T, error>;

using status = result<void>;

inline std::unexpected<error> make_error(error_kind kind, std::string message) {
  return std::unexpected(error{kind, std::move(message), 0});
}

template <class... Args>
std::unexpected<error> make_error(error_kind kind, fmt::format_string<Args...> f, Args&&... args) {
  return std::unexpected(error{kind, fmt::format(f, std::forward<Args>(args)...), 0});
}

// An error for a failed system call: "what: strerror(err)", kind derived from errno.
std::unexpected<error> sys_error(int err, std::string_view what);

template <class... Args>
std::unexpected<error> sys_error(int err, fmt::format_string<Args...> f, Args&&... args) {
  return sys_error(err, std::string_view(fmt::format(f, std::forward<Args>(args)...)));
}

// Maps an errno to the closest kind (EPERM/EACCES -> permission, ENOENT -> not_found, ...).
error_kind kind_from_errno(int err) noexcept;

// A short errno name ("EPERM") for messages and records; "E<n>" when unknown.
std::string errno_name(int err);

}  // namespace base
}  // namespace evalbox

// Propagation. EB_TRY(expr) yields the value of a result<T> or returns its error from the
// enclosing function; EB_TRY_CTX adds context first. GNU statement expressions (GCC/Clang).
#define EB_TRY(expr)                                                              \
  ({                                                                              \
    auto&& eb_try_result = (expr);                                                \
    if (!eb_try_result) return std::unexpected(std::move(eb_try_result).error()); \
    std::move(eb_try_result).value();                                             \
  })

#define EB_TRY_CTX(expr, ctx)                                                     \
  ({                                                                              \
    auto&& eb_try_result = (expr);                                                \
    if (!eb_try_result)                                                           \
      return std::unexpected(std::move(eb_try_result).error().with_context(ctx)); \
    std::move(eb_try_result).value();                                             \
  })
