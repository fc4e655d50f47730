// Credential leases: a run's private, exclusive, persistent copy of a credential file.
//
// <leases>/<handle>-<sha256 of source> is copied from the source once (0600, owned by the
// sandbox id) and then reused: what a run writes into it (a rotated token) is what the next
// run leasing the same source gets, while a changed source (a re-login) hashes differently and
// gets a fresh lease, the old one left alone. A lease is held with flock(LOCK_EX|LOCK_NB) on
// an open file description of its own, so a second holder — another process or another thread
// of this one — fails with error_kind::busy ("already in use"). Contents never reach a log:
// they are registered with log::redact_secret().
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "base/unique_fd.h"
#include "sandbox/spec/request.h"

namespace evalbox::sandbox::creds {

class credential_lease {
 public:
  credential_lease() = default;
  credential_lease(credential_lease&&) noexcept = default;
  credential_lease& operator=(credential_lease&&) noexcept = default;
  ~credential_lease() = default;  // unlocks (locked_fd)

  // Creates `leases_dir` (0700) if needed, creates the lease from the source if absent, and
  // locks it. The source must already be validated (regular file, owner-only, <= 1 MiB).
  static result<credential_lease> acquire(const std::filesystem::path& leases_dir,
                                          const secret_mount& secret, uid_t owner_uid,
                                          gid_t owner_gid);

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] const std::string& handle() const noexcept { return handle_; }
  // SHA-256 of the source's content: names the lease and enters the binding digest.
  [[nodiscard]] const std::string& source_digest() const noexcept { return source_digest_; }
  [[nodiscard]] bool held() const noexcept { return fd_.valid(); }
  // Unlocks; the lease file stays for the next run.
  void release() noexcept { fd_.unlock(); }

 private:
  locked_fd fd_;
  std::filesystem::path path_;
  std::string handle_;
  std::string source_digest_;
};

}  // namespace evalbox::sandbox::creds
