// Credential leases: a run's private, persistent copy of a credential file, held by one run
// at a time or, for a shared credential, by up to max_concurrent runs.
//
// <leases>/<handle>-<sha256 of source> is copied from the source once (0600, owned by the
// sandbox id) and then reused: what a run writes into it (a rotated token) is what the next
// run leasing the same source gets, while a changed source (a re-login) hashes differently and
// gets a fresh lease, the old one left alone. A holder locks one slot with flock(LOCK_EX|
// LOCK_NB) on an open file description of its own: slot 0 is the lease file itself, slot k
// (1 <= k < max_concurrent) the empty file <lease>.slot-<k>. So an exclusive lease
// (max_concurrent 1, a login file) has one slot, as it always had, and a second holder —
// another process or another thread of this one — fails with error_kind::busy ("already in
// use"); a shared one (an API key) is held by as many runs as it has slots, and every holder
// reads the same file, mounted read-only (secret_mount: a write would change what the other
// holders read, so none may write; one file rather than a copy each, so that nothing diverges
// silently). Contents never reach a log: they are registered with log::redact_secret().
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
  // locks a free one of its secret.max_concurrent slots. The source must already be validated
  // (regular file, owner-only, <= 1 MiB). error_kind::busy when every slot is held.
  static result<credential_lease> acquire(const std::filesystem::path& leases_dir,
                                          const secret_mount& secret, uid_t owner_uid,
                                          gid_t owner_gid);

  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] const std::string& handle() const noexcept { return handle_; }
  // SHA-256 of the source's content: names the lease and enters the binding digest.
  [[nodiscard]] const std::string& source_digest() const noexcept { return source_digest_; }
  [[nodiscard]] bool held() const noexcept { return fd_.valid(); }
  // The slot this holder locked: 0 (the lease file) .. max_concurrent - 1.
  [[nodiscard]] int slot() const noexcept { return slot_; }
  // Held by one run at a time (max_concurrent 1): mounted writable.
  [[nodiscard]] bool exclusive() const noexcept { return max_concurrent_ == 1; }
  // Unlocks; the lease file stays for the next run.
  void release() noexcept { fd_.unlock(); }

 private:
  locked_fd fd_;
  std::filesystem::path path_;
  std::string handle_;
  std::string source_digest_;
  int slot_ = 0;
  int max_concurrent_ = 1;
};

}  // namespace evalbox::sandbox::creds
