// Credential leases (see lease.h): create once from the source, then lock one of its slots.
#include "sandbox/creds/lease.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/log.h"
#include "sandbox/spec/validate.h"  // max_credential_bytes: the limit validation promised

namespace evalbox::sandbox::creds {

namespace fs = std::filesystem;

namespace {

// Reads a regular file without following a final symlink (the source was validated, but it
// could have been swapped for a link since).
result<std::string> read_nofollow(const fs::path& path, size_t max_bytes) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open credential source {}", path.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error(errno, "stat {}", path.string());
  if (!S_ISREG(st.st_mode))
    return make_error(error_kind::invalid_argument, "credential source {} is not a regular file",
                      path.string());
  auto content = read_fd(fd.get(), max_bytes, path);
  if (!content && content.error().kind == error_kind::invalid_argument)
    return make_error(error_kind::invalid_argument, "credential source {} exceeds 1 MiB",
                      path.string());
  return content;
}

// Writes the lease atomically (temp file, fchown, fsync, rename without replacing): a
// concurrent creator of the same lease wins or loses cleanly, and a crash leaves no torn file.
status create_lease(const fs::path& lease, std::string_view content, uid_t uid, gid_t gid) {
  fs::path tmp = lease.parent_path() / (".tmp-" + random_suffix());
  unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return sys_error(errno, "create {}", tmp.string());
  auto fail = [&](int err, std::string what) {
    ::unlink(tmp.c_str());
    return sys_error(err, "{} {}", what, tmp.string());
  };
  std::string_view rest = content;
  while (!rest.empty()) {
    ssize_t n = ::write(fd.get(), rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(errno, "write");
    rest.remove_prefix(static_cast<size_t>(n));
  }
  if (::fchown(fd.get(), uid, gid) != 0 && ::geteuid() == 0) return fail(errno, "fchown");
  if (::fchmod(fd.get(), 0600) != 0) return fail(errno, "fchmod");
  if (::fsync(fd.get()) != 0) return fail(errno, "fsync");
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, lease.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    if (err != EEXIST) return sys_error(err, "rename {} -> {}", tmp.string(), lease.string());
  }
  return {};
}

// Slot 0 is the lease file itself (so an exclusive lease locks what it always locked); slot k
// the empty file <lease>.slot-<k>, there only for its lock.
fs::path slot_path(const fs::path& lease, int k) {
  return k == 0 ? lease : fs::path(fmt::format("{}.slot-{}", lease.string(), k));
}

// Opens slot `k` of `lease` (creating a slot file, empty and 0600, when absent) into `fds`. A
// slot file is never mounted: it stays evalbox's.
status open_slot(const fs::path& lease, int k, std::vector<unique_fd>& fds) {
  const fs::path p = slot_path(lease, k);
  const int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | (k == 0 ? 0 : O_CREAT);
  unique_fd fd(::open(p.c_str(), flags, 0600));
  if (!fd) return sys_error(errno, "open {}", p.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return make_error(error_kind::internal, "{} is not a regular file", p.string());
  fds.push_back(std::move(fd));
  return {};
}

}  // namespace

result<credential_lease> credential_lease::acquire(const fs::path& leases_dir,
                                                   const secret_mount& secret, uid_t owner_uid,
                                                   gid_t owner_gid) {
  auto ctx = fmt::format("credential lease {}", secret.handle);
  if (::mkdir(leases_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return std::unexpected(
        sys_error(errno, "mkdir {}", leases_dir.string()).error().with_context(ctx));
  auto content = EB_TRY_CTX(read_nofollow(secret.source, max_credential_bytes), ctx);
  log::redact_secret(content);

  credential_lease lease;
  lease.handle_ = secret.handle;
  lease.source_digest_ = sha256_hex(content);
  lease.path_ = leases_dir / fmt::format("{}-{}", secret.handle, lease.source_digest_);

  struct stat st {};
  if (::lstat(lease.path_.c_str(), &st) != 0) {
    if (errno != ENOENT) return sys_error(errno, "stat {}", lease.path_.string());
    EB_TRY_CTX(create_lease(lease.path_, content, owner_uid, owner_gid), ctx);
  }
  // Our own open file description of each slot: flock conflicts between two of them even in
  // one process.
  const int slots = std::max(1, secret.max_concurrent);
  std::vector<unique_fd> fds;
  for (int k = 0; k < slots; ++k) EB_TRY_CTX(open_slot(lease.path_, k, fds), ctx);
  // A lock is its open file description's, and a description lives while any process holds a
  // copy of it: a child between its fork and its exec (a sandbox helper being started by
  // another thread) holds one for a moment. A lease unlocks before it closes (locked_fd); a
  // holder that died without it (a crash) leaves the lock to such a copy until the child's
  // exec. So when every slot is taken they are asked for again for up to 100 ms before the
  // lease is busy.
  int err = 0;
  int slot = -1, tried = 0;
  for (int tries = 1; slot < 0; ++tries) {
    for (tried = 0; tried < slots; ++tried) {
      err = ::flock(fds[static_cast<size_t>(tried)].get(), LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
      if (err == 0) {
        slot = tried;
        break;
      }
      if (err != EWOULDBLOCK) break;
    }
    if (slot >= 0 || err != EWOULDBLOCK || tries == 50) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (slot < 0) {
    if (err == EWOULDBLOCK && slots == 1)
      return make_error(error_kind::busy,
                        "credential {} ({}) is already in use by another run: a lease is "
                        "exclusive; wait for that run to finish (the runner schedules it after)",
                        secret.handle, secret.source.string());
    if (err == EWOULDBLOCK)
      return make_error(error_kind::busy,
                        "credential {} ({}) is already in use by {} runs, its max_concurrent; "
                        "wait for one of them to finish (the runner schedules it after)",
                        secret.handle, secret.source.string(), slots);
    return std::unexpected(sys_error(err, "flock {}", slot_path(lease.path_, tried).string())
                               .error()
                               .with_context(ctx));
  }
  unique_fd fd = std::move(fds[static_cast<size_t>(slot)]);
  lease.slot_ = slot;
  lease.max_concurrent_ = slots;
  lease.fd_ = locked_fd(std::move(fd));
  // A rotated token written by an earlier run is a secret too.
  if (auto current = read_nofollow(lease.path_, max_credential_bytes)) log::redact_secret(*current);
  return lease;
}

}  // namespace evalbox::sandbox::creds
