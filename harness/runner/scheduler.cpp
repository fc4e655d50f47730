// The runner's scheduling rules (see scheduler.h).
#include "harness/runner/scheduler.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "base/log.h"

namespace evalbox::harness {
inline namespace runner {

scheduler::ticket::ticket(ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), run_(std::move(other.run_)) {}

scheduler::ticket::~ticket() {
  if (owner_) owner_->release(run_);
}

scheduler::scheduler(std::vector<queued_run> queue, scheduler_options options)
    : options_(std::move(options)), queue_(std::move(queue)) {}

std::optional<scheduler::ticket> scheduler::next() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopped_ || stopping() || queue_.empty()) return std::nullopt;
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const queued_run& q) {
      return std::none_of(q.leases.begin(), q.leases.end(),
                          [&](const std::string& h) { return held_.contains(h); });
    });
    if (it != queue_.end()) {
      queued_run run = std::move(*it);
      queue_.erase(it);
      held_.insert(run.leases.begin(), run.leases.end());
      return ticket(*this, std::move(run));
    }
    if (!wait_noted_) {
      wait_noted_ = true;
      log::warn(
          "waiting: a run's credential lease is in use by another run "
          "(one login serves one run at a time)");
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
  for (const auto& h : run.leases) held_.erase(h);
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
                        const std::function<attempt_report(int attempt)>& attempt) const {
  int n = 0;
  bool lease_noted = false;
  for (;;) {
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
