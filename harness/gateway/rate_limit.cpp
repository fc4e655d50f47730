// A sliding window of reservations (see rate_limit.h).
#include "harness/gateway/rate_limit.h"

#include <algorithm>
#include <thread>

namespace evalbox::harness::gateway {

request_rate::request_rate(uint32_t per_window, std::chrono::milliseconds window)
    : n_(std::max<uint32_t>(per_window, 1)), window_(window) {}

request_rate::clock::time_point request_rate::reserve(clock::time_point now) {
  std::lock_guard lock(mu_);
  clock::time_point slot = now;
  if (slots_.size() >= n_) slot = std::max(now, slots_.front() + window_);
  if (!slots_.empty()) slot = std::max(slot, slots_.back());  // first come, first served
  slots_.push_back(slot);
  while (slots_.size() > n_) slots_.pop_front();
  return slot;
}

std::optional<std::chrono::milliseconds> request_rate::acquire(const std::atomic<bool>* stop) {
  const auto start = clock::now();
  const auto slot = reserve(start);
  for (auto now = start; now < slot; now = clock::now()) {
    if (stop && stop->load()) return std::nullopt;
    std::this_thread::sleep_for(
        std::min<clock::duration>(slot - now, std::chrono::milliseconds(50)));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
}

}  // namespace evalbox::harness::gateway
