// A credential's requests_per_minute (docs/suite-format.md, "credentials"), honoured by the
// model gateways in front of it: one request_rate per credential, shared by every run's gateway
// in this evalbox process. At most `per_window` requests go upstream in any window (a minute): a
// request over it waits — it is never refused — for the slot the window frees, in the order the
// requests came. Answers from the model cache and requests the gateway refuses take no slot.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace evalbox::harness::gateway {

class request_rate {
 public:
  using clock = std::chrono::steady_clock;

  explicit request_rate(uint32_t per_window,
                        std::chrono::milliseconds window = std::chrono::minutes(1));

  // The time a request that comes at `now` may go upstream, reserved for it: `now` while the
  // last window holds fewer than per_window requests, else one window after the request
  // per_window places before it. Reservations are kept in order, so requests go first come,
  // first served.
  clock::time_point reserve(clock::time_point now);

  // Reserves a slot and waits for it: how long it waited, or nothing when `stop` became true
  // first (looked at every 50 ms; the slot stays taken).
  std::optional<std::chrono::milliseconds> acquire(const std::atomic<bool>* stop);

 private:
  std::mutex mu_;
  std::deque<clock::time_point> slots_;  // the last per_window reservations, oldest first
  uint32_t n_;
  clock::duration window_;
};

}  // namespace evalbox::harness::gateway
