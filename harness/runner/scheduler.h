// The runner's scheduling rules, apart from any sandbox so that they can be tested alone:
// which queued run a worker starts next, and how many attempts a run gets.
//
// - A run starts only when each of its credential handles is held by fewer running runs of
//   this process than the handle's max_concurrent (1 unless options say otherwise: one login
//   serves one run at a time). A run whose credential is full is passed over for the next
//   startable one, so no worker idles while another run could start; it starts once a lease
//   is released, before any run queued after it that needs the same credential (the queue is
//   in plan order and the first startable run is taken: first come, first served). A worker
//   with nothing startable sleeps on a condition variable, woken by each release, and says
//   so once.
// - How long a run waited for its credentials is on its ticket: from the first time a worker
//   passed it over because a credential was full until it started (time spent waiting for a
//   free worker is not counted).
// - A lease held by another evalbox process on the same state root (the attempt reports
//   attempt_end::lease_held_elsewhere) is waited for: the attempt is repeated every
//   `lease_poll`, is not counted as a retry, and is said once per run; that time is counted
//   as credential wait too (attempts()).
// - An infrastructure error is retried `retries` times, with backoff doubling from `backoff`
//   (at most 32 times it); anything else ends the run's attempts.
//
// Threads: next(), stop() and ticket release may be called from any worker at once;
// attempts() runs on the calling worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evalbox::harness {
inline namespace runner {

// One run waiting to start: its index in the runner's list and the credential handles it
// leases.
struct queued_run {
  size_t run = 0;
  std::vector<std::string> leases;
};

// How one attempt at a run ended, as far as scheduling goes.
enum class attempt_end {
  done,                  // final: passed, failed, or an error another attempt would repeat
  infrastructure_error,  // the sandbox or host failed: retry while retries remain
  lease_held_elsewhere,  // another evalbox process holds a lease of the run: wait, try again
  cancelled,             // stopping: nothing is recorded
};

struct attempt_report {
  attempt_end end = attempt_end::done;
  std::string why;  // for an infrastructure error: "<kind>: <message>", logged with the retry
};

struct scheduler_options {
  int retries = 0;
  // Credential handle -> how many runs may hold it at once; a handle not here: 1.
  std::map<std::string, int> max_concurrent;
  std::chrono::milliseconds lease_poll{500};
  std::chrono::milliseconds backoff{500};
  // How often a worker waiting for a lease looks at `stopping` (a signal sets the token
  // without waking anyone).
  std::chrono::milliseconds idle_poll{200};
  std::function<bool()> stopping;  // true once the run is cancelled; may be empty
  // How attempts() waits; std::this_thread::sleep_for when empty (tests pass their own).
  std::function<void(std::chrono::milliseconds)> sleep;
};

class scheduler {
 public:
  // A started run: holds its leases until destroyed (after the run's sandbox is torn down).
  class ticket {
   public:
    ticket(ticket&& other) noexcept;
    ticket& operator=(ticket&&) = delete;
    ticket(const ticket&) = delete;
    ~ticket();
    [[nodiscard]] size_t run() const noexcept { return run_.run; }
    // How long the run waited for a free lease of its credentials before it started.
    [[nodiscard]] std::chrono::milliseconds credential_wait() const noexcept { return waited_; }

   private:
    friend class scheduler;
    ticket(scheduler& owner, queued_run run, std::chrono::milliseconds waited)
        : owner_(&owner), run_(std::move(run)), waited_(waited) {}
    scheduler* owner_;
    queued_run run_;
    std::chrono::milliseconds waited_{0};
  };

  scheduler(std::vector<queued_run> queue, scheduler_options options);

  // The first queued run none of whose credentials is full, with its leases taken; waits
  // while every queued run waits for a lease. nullopt once the queue is empty, the run is stopping,
  // or stop() was called.
  std::optional<ticket> next();
  // Hands out no more runs (a worker met a fatal error); running ones finish.
  void stop();
  // Calls `attempt` with 0, 1, ... until an attempt is final (see attempt_end) or the run is
  // stopping; returns the number of the last attempt made. `run_name` names the run in the
  // notes logged. `lease_wait`, when given, gets the time spent on attempts that found a lease
  // held by another process and the waits after them.
  int attempts(std::string_view run_name, const std::function<attempt_report(int attempt)>& attempt,
               std::chrono::milliseconds* lease_wait = nullptr) const;

  [[nodiscard]] size_t queued() const;

 private:
  void release(const queued_run& run);
  [[nodiscard]] bool startable(const queued_run& run) const;
  [[nodiscard]] bool stopping() const { return options_.stopping && options_.stopping(); }
  void sleep(std::chrono::milliseconds d) const;

  scheduler_options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<queued_run> queue_;    // in plan order; a started run is erased
  std::map<std::string, int> held_;  // handle -> running runs holding it
  // Queued run -> when a worker first passed it over because a credential was full.
  std::map<size_t, std::chrono::steady_clock::time_point> blocked_since_;
  bool stopped_ = false;
  bool wait_noted_ = false;
};

}  // namespace runner
}  // namespace evalbox::harness
