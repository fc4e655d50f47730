// The runner's scheduling rules (see scheduler.h).
#include "harness/runner/scheduler.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "base/log.h"

namespace evalbox::harness {
inline namespace runner {

scheduler::ticket::ticket(ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      run_(std::move(other.run_)),
      waited_(other.waited_) {}

scheduler::ticket::~ticket() {
  if (owner_) owner_->release(run_);
}

scheduler::scheduler(std::vector<queued_run> queue, scheduler_options options)
    : options_(std::move(options)), queue_(std::move(queue)) {}

bool scheduler::startable(const queued_run& q) const {
  return std::all_of(q.leases.begin(), q.leases.end(), [&](const std::string& h) {
    auto held = held_.find(h);
    auto limit = options_.max_concurrent.find(h);
    return (held == held_.end() ? 0 : held->second) <
           (limit == options_.max_concurrent.end() ? 1 : limit->second);
  });
}

std::optional<scheduler::ticket> scheduler::next() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopped_ || stopping() || queue_.empty()) return std::nullopt;
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const queued_run& q) { return startable(q); });
    // Every run before `it` was passed over by a free worker: it waits for a credential.
    const auto now = std::chrono::steady_clock::now();
    for (auto q = queue_.begin(); q != it; ++q) blocked_since_.try_emplace(q->run, now);
    if (it != queue_.end()) {
      queued_run run = std::move(*it);
      queue_.erase(it);
      for (const auto& h : run.leases) ++held_[h];
      std::chrono::milliseconds waited{0};
      if (auto b = blocked_since_.find(run.run); b != blocked_since_.end()) {
        waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - b->second);
        blocked_since_.erase(b);
      }
      return ticket(*this, std::move(run), waited);
    }
    if (!wait_noted_) {
      wait_noted_ = true;
      log::warn(
          "waiting: a run's credential lease is in use by other runs "
          "(a login serves one run at a time; a credential up to its max_concurrent)");
    }
    cv_.wait_for(lock, options_.idle_poll);
  }
}

void scheduler::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

void scheduler::release(const queued_run& run) {
  std::lock_guard lock(mu_);
  for (const auto& h : run.leases)
    if (auto it = held_.find(h); it != held_.end() && --it->second <= 0) held_.erase(it);
  cv_.notify_all();
}

size_t scheduler::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void scheduler::sleep(std::chrono::milliseconds d) const {
  if (options_.sleep)
    options_.sleep(d);
  else
    std::this_thread::sleep_for(d);
}

int scheduler::attempts(std::string_view run_name,
                        const std::function<attempt_report(int attempt)>& attempt,
                        std::chrono::milliseconds* lease_wait) const {
  int n = 0;
  bool lease_noted = false;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    attempt_report r = attempt(n);
    if (r.end == attempt_end::cancelled || stopping()) return n;
    if (r.end == attempt_end::lease_held_elsewhere) {
      if (!lease_noted) {
        lease_noted = true;
        log::warn(
            "run {}: waiting: its credential lease is held by another evalbox process "
            "(one login serves one run at a time; checking every {} s)",
            run_name, std::chrono::duration<double>(options_.lease_poll).count());
      }
      sleep(options_.lease_poll);
      if (lease_wait)
        *lease_wait += std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - t0);
      continue;
    }
    if (r.end != attempt_end::infrastructure_error || n >= options_.retries) return n;
    log::warn("run {} attempt {}: {} (retrying)", run_name, n + 1, r.why);
    sleep(options_.backoff * (1 << std::min(n, 5)));
    ++n;
  }
}

}  // namespace runner
}  // namespace evalbox::harness
