// Error kinds, errno mapping and context for evalbox::error.
#include "base/error.h"

#include <cstring>

namespace evalbox {
inline namespace base {

std::string_view to_string(error_kind kind) noexcept {
  switch (kind) {
    case error_kind::invalid_argument:
      return "invalid_argument";
    case error_kind::not_found:
      return "not_found";
    case error_kind::permission:
      return "permission";
    case error_kind::busy:
      return "busy";
    case error_kind::expired:
      return "expired";
    case error_kind::unsupported:
      return "unsupported";
    case error_kind::io:
      return "io";
    case error_kind::cancelled:
      return "cancelled";
    case error_kind::internal:
      return "internal";
  }
  return "internal";
}

error&& error::with_context(std::string_view what) && {
  message = fmt::format("{}: {}", what, message);
  return std::move(*this);
}

error& error::with_context(std::string_view what) & {
  message = fmt::format("{}: {}", what, message);
  return *this;
}

error_kind kind_from_errno(int err) noexcept {
  switch (err) {
    case EPERM:
    case EACCES:
    case EROFS:
      return error_kind::permission;
    case ENOENT:
    case ENOTDIR:
    case ESRCH:
      return error_kind::not_found;
    case EBUSY:
    case EWOULDBLOCK:
      return error_kind::busy;
    case EINVAL:
    case ELOOP:
    case ENAMETOOLONG:
    case EEXIST:
      return error_kind::invalid_argument;
    case ENOSYS:
    case EOPNOTSUPP:
    case ENODEV:
      return error_kind::unsupported;
    case ECANCELED:
    case EINTR:
      return error_kind::cancelled;
    default:
      return error_kind::io;
  }
}

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name ? std::string(name) : fmt::format("E{}", err);
}

std::unexpected<error> sys_error(int err, std::string_view what) {
  return std::unexpected(
      error{kind_from_errno(err), fmt::format("{}: {}", what, errno_name(err)), err});
}

}  // namespace base
}  // namespace evalbox
