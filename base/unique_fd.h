// unique_fd owns one file descriptor; borrowed_fd names one it does not own; locked_fd owns one
// that holds a flock(2).
// Every fd evalbox opens lives in a unique_fd: no raw close() on error paths.
#pragma once

#include <sys/file.h>
#include <unistd.h>

#include <utility>

namespace evalbox {
inline namespace base {

class borrowed_fd {
 public:
  constexpr borrowed_fd() noexcept = default;
  constexpr explicit borrowed_fd(int fd) noexcept : fd_(fd) {}
  [[nodiscard]] constexpr int get() const noexcept { return fd_; }
  [[nodiscard]] constexpr bool valid() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

class unique_fd {
 public:
  constexpr unique_fd() noexcept = default;
  constexpr explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~unique_fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  [[nodiscard]] borrowed_fd borrow() const noexcept { return borrowed_fd(fd_); }
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// An fd holding a flock(2), unlocked before it is closed. A lock belongs to the open file
// description, which lives while any process holds a copy of the fd: a child between its fork
// and its exec (another thread starting a program) keeps a lock released only by close() a
// moment longer, and a lock wanted at once (LOCK_NB) is then found busy.
class locked_fd {
 public:
  locked_fd() noexcept = default;
  // `fd` already holds its lock.
  explicit locked_fd(unique_fd fd) noexcept : fd_(std::move(fd)) {}
  locked_fd(locked_fd&&) noexcept = default;
  locked_fd& operator=(locked_fd&& other) noexcept {
    if (this != &other) {
      unlock();
      fd_ = std::move(other.fd_);
    }
    return *this;
  }
  ~locked_fd() { unlock(); }

  [[nodiscard]] int get() const noexcept { return fd_.get(); }
  [[nodiscard]] bool valid() const noexcept { return fd_.valid(); }
  explicit operator bool() const noexcept { return valid(); }
  // Unlocks and closes.
  void unlock() noexcept {
    if (fd_) (void)::flock(fd_.get(), LOCK_UN);
    fd_.reset();
  }

 private:
  unique_fd fd_;
};

}  // namespace base
}  // namespace evalbox
