// unique_fd owns one file descriptor; borrowed_fd names one it does not own.
// Every fd evalbox opens lives in a unique_fd: no raw close() on error paths.
#pragma once

#include <unistd.h>

#include <utility>

namespace evalbox {

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

}  // namespace evalbox
