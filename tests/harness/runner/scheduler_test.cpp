// The runner's scheduling rules without any sandbox: a run whose credential lease is busy is
// passed over and started once the lease is released, never two runs on one lease at once
// (never more than max_concurrent on a shared one), in plan order, its wait on its ticket; a
// lease held by another process is waited for without using up retries; infrastructure
// errors are retried with backoff, everything else is final; stopping ends it all.
#include "harness/runner/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace evalbox::harness {
namespace {

using namespace std::chrono_literals;

std::vector<queued_run> queue_of(std::vector<std::vector<std::string>> leases) {
  std::vector<queued_run> q;
  for (size_t i = 0; i < leases.size(); ++i) q.push_back({i, std::move(leases[i])});
  return q;
}

scheduler_options fast() {
  scheduler_options o;
  o.idle_poll = 5ms;
  return o;
}

TEST(Scheduler, HandsOutRunsInPlanOrder) {
  scheduler s(queue_of({{}, {}, {}}), fast());
  for (size_t want : {0u, 1u, 2u}) {
    auto t = s.next();
    ASSERT_TRUE(t);
    EXPECT_EQ(t->run(), want);
  }
  EXPECT_FALSE(s.next());
}

TEST(Scheduler, ARunWhoseLeaseIsBusyIsPassedOverAndStartsAfterRelease) {
  scheduler s(queue_of({{"login"}, {"login"}, {}}), fast());
  auto first = s.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->run(), 0u);
  // Run 1 waits for run 0's lease: run 2 comes first.
  auto second = s.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->run(), 2u);
  // Now only run 1 is left, and its lease is held: the next worker waits...
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  EXPECT_EQ(waiting.wait_for(100ms), std::future_status::timeout);
  // ...until run 0 is torn down and its ticket goes.
  first.reset();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  auto third = waiting.get();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->run(), 1u);
}

TEST(Scheduler, NeverRunsTwoRunsOnOneLeaseAtOnce) {
  // Eight runs on two logins and four without any, on four workers.
  std::vector<std::vector<std::string>> leases;
  for (int i = 0; i < 12; ++i)
    leases.push_back(i % 3 == 0   ? std::vector<std::string>{"a"}
                     : i % 3 == 1 ? std::vector<std::string>{"a", "b"}
                                  : std::vector<std::string>{});
  scheduler s(queue_of(leases), fast());
  std::atomic<int> on_a{0}, max_on_a{0}, started{0};
  auto worker = [&] {
    while (auto t = s.next()) {
      ++started;
      bool a = !leases[t->run()].empty();
      if (a) {
        int now = ++on_a;
        int seen = max_on_a.load();
        while (now > seen && !max_on_a.compare_exchange_weak(seen, now)) {
        }
      }
      std::this_thread::sleep_for(2ms);
      if (a) --on_a;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  EXPECT_EQ(started.load(), 12);
  EXPECT_EQ(max_on_a.load(), 1);
  EXPECT_EQ(s.queued(), 0u);
}

TEST(Scheduler, ACredentialWithMaxConcurrentNServesNRunsAtOnce) {
  // Nine runs on one API key shared by three, on six workers: three at a time, never four.
  std::vector<std::vector<std::string>> leases(9, {"key"});
  auto o = fast();
  o.max_concurrent = {{"key", 3}};
  scheduler s(queue_of(leases), o);
  std::atomic<int> on{0}, max_on{0}, started{0};
  auto worker = [&] {
    while (auto t = s.next()) {
      ++started;
      int now = ++on;
      int seen = max_on.load();
      while (now > seen && !max_on.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(20ms);
      --on;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  EXPECT_EQ(started.load(), 9);
  EXPECT_EQ(max_on.load(), 3);
}

TEST(Scheduler, ASharedCredentialIsFullAtItsMaxConcurrentAndAnotherStaysExclusive) {
  auto o = fast();
  o.max_concurrent = {{"key", 2}};
  scheduler s(queue_of({{"key"}, {"key"}, {"key"}, {"login"}, {"login"}}), o);
  auto a = s.next(), b = s.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->run(), 0u);
  EXPECT_EQ(b->run(), 1u);  // two at once on the shared key
  auto c = s.next();        // the key is full: run 2 is passed over for the first login run
  ASSERT_TRUE(c);
  EXPECT_EQ(c->run(), 3u);
  // Run 4 needs the login (exclusive, the default) and run 2 the key: both full.
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  EXPECT_EQ(waiting.wait_for(50ms), std::future_status::timeout);
  a.reset();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  auto d = waiting.get();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->run(), 2u);
}

TEST(Scheduler, RunsWaitingForOneCredentialStartInPlanOrder) {
  scheduler s(queue_of({{"login"}, {"login"}, {"login"}, {"login"}}), fast());
  std::vector<size_t> order;
  for (int i = 0; i < 4; ++i) {
    auto t = s.next();
    ASSERT_TRUE(t);
    order.push_back(t->run());
  }  // each ticket released before the next is asked for
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(Scheduler, TheTimeARunWaitedForItsCredentialIsOnItsTicket) {
  scheduler s(queue_of({{"login"}, {"login"}, {}}), fast());
  auto first = s.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->credential_wait(), 0ms) << "nothing held it back";
  auto free_run = s.next();  // run 1 passed over from now on
  ASSERT_TRUE(free_run);
  EXPECT_EQ(free_run->run(), 2u);
  EXPECT_EQ(free_run->credential_wait(), 0ms) << "no credential";
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  std::this_thread::sleep_for(120ms);
  first.reset();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  auto second = waiting.get();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->run(), 1u);
  EXPECT_GE(second->credential_wait(), 100ms);
}

TEST(Scheduler, WaitingForAFreeWorkerIsNotCredentialWait) {
  scheduler s(queue_of({{"login"}, {"other"}}), fast());
  auto first = s.next();
  ASSERT_TRUE(first);
  std::this_thread::sleep_for(30ms);  // run 1 waits for a worker, not for its credential
  auto second = s.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->credential_wait(), 0ms);
}

TEST(Scheduler, StopHandsOutNothingMoreAndWakesAWaitingWorker) {
  scheduler s(queue_of({{"x"}, {"x"}, {}}), fast());
  auto held = s.next();
  ASSERT_TRUE(held);
  auto free_run = s.next();
  ASSERT_TRUE(free_run);
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  EXPECT_EQ(waiting.wait_for(50ms), std::future_status::timeout);
  s.stop();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
  held.reset();
  EXPECT_FALSE(s.next());
  EXPECT_EQ(s.queued(), 1u);  // never started, so never recorded
}

TEST(Scheduler, ACancelledRunStopsScheduling) {
  std::atomic<bool> cancel{false};
  auto o = fast();
  o.stopping = [&] { return cancel.load(); };
  scheduler s(queue_of({{"x"}, {"x"}}), o);
  auto held = s.next();
  ASSERT_TRUE(held);
  // A signal sets the token without waking anyone: the waiting worker notices on its own.
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  cancel = true;
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
}

// attempts(): every sleep is recorded instead of slept.
class Attempts : public ::testing::Test {
 protected:
  scheduler make(int retries) {
    auto o = fast();
    o.retries = retries;
    o.stopping = [this] { return stop_.load(); };
    o.sleep = [this](std::chrono::milliseconds d) { sleeps_.push_back(d); };
    return scheduler({}, o);
  }
  // Runs attempts() over a script of attempt ends; returns the last attempt number.
  int run(const scheduler& s, std::vector<attempt_end> script) {
    calls_.clear();
    return s.attempts("r1", [&](int attempt) {
      calls_.push_back(attempt);
      attempt_end e =
          calls_.size() <= script.size() ? script[calls_.size() - 1] : attempt_end::done;
      return attempt_report{e, "sandbox: overlay mount failed"};
    });
  }
  std::vector<std::chrono::milliseconds> sleeps_;
  std::vector<int> calls_;
  std::atomic<bool> stop_{false};
};

TEST_F(Attempts, AFinalAttemptIsTheOnlyOne) {
  auto s = make(3);
  EXPECT_EQ(run(s, {attempt_end::done}), 0);
  EXPECT_EQ(calls_, (std::vector<int>{0}));
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(Attempts, InfrastructureErrorsAreRetriedWithDoublingBackoff) {
  auto s = make(2);
  EXPECT_EQ(run(s, {attempt_end::infrastructure_error, attempt_end::infrastructure_error,
                    attempt_end::infrastructure_error, attempt_end::done}),
            2);
  EXPECT_EQ(calls_, (std::vector<int>{0, 1, 2}));  // retries exhausted: the third is recorded
  EXPECT_EQ(sleeps_, (std::vector<std::chrono::milliseconds>{500ms, 1000ms}));
}

TEST_F(Attempts, BackoffStopsDoublingAtThirtyTwoTimes) {
  auto s = make(8);
  std::vector<attempt_end> script(9, attempt_end::infrastructure_error);
  EXPECT_EQ(run(s, script), 8);
  ASSERT_EQ(sleeps_.size(), 8u);
  EXPECT_EQ(sleeps_[5], 16000ms);
  EXPECT_EQ(sleeps_[6], 16000ms);
  EXPECT_EQ(sleeps_[7], 16000ms);
}

TEST_F(Attempts, NoRetriesMeansOneAttempt) {
  auto s = make(0);
  EXPECT_EQ(run(s, {attempt_end::infrastructure_error}), 0);
  EXPECT_EQ(calls_.size(), 1u);
}

TEST_F(Attempts, ALeaseHeldElsewhereIsWaitedForWithoutUsingRetries) {
  auto s = make(0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run(s, {attempt_end::lease_held_elsewhere, attempt_end::lease_held_elsewhere,
                    attempt_end::lease_held_elsewhere, attempt_end::done}),
            0);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls_, (std::vector<int>{0, 0, 0, 0}));  // the same attempt, tried again
  EXPECT_EQ(sleeps_, (std::vector<std::chrono::milliseconds>{500ms, 500ms, 500ms}));
  // Said once per run, not once per check.
  const std::string note =
      "run r1: waiting: its credential lease is held by another evalbox "
      "process (one login serves one run at a time; checking every 0.5 s)";
  ASSERT_NE(err.find(note), std::string::npos) << err;
  EXPECT_EQ(err.find(note, err.find(note) + 1), std::string::npos) << err;
}

TEST_F(Attempts, TimeSpentOnALeaseHeldElsewhereIsCounted) {
  auto o = fast();
  o.lease_poll = 20ms;  // slept for real
  scheduler s({}, o);
  std::chrono::milliseconds waited{0};
  int calls = 0;
  s.attempts(
      "r1",
      [&](int) {
        return attempt_report{++calls <= 3 ? attempt_end::lease_held_elsewhere : attempt_end::done,
                              ""};
      },
      &waited);
  EXPECT_EQ(calls, 4);
  EXPECT_GE(waited, 60ms);
}

TEST_F(Attempts, ACancelledAttemptEndsTheRun) {
  auto s = make(5);
  EXPECT_EQ(run(s, {attempt_end::infrastructure_error, attempt_end::cancelled}), 1);
  EXPECT_EQ(calls_.size(), 2u);
}

TEST_F(Attempts, StoppingEndsTheRunWhateverTheAttemptSaid) {
  auto s = make(5);
  stop_ = true;
  EXPECT_EQ(run(s, {attempt_end::lease_held_elsewhere}), 0);
  EXPECT_EQ(calls_.size(), 1u);
  EXPECT_TRUE(sleeps_.empty());
}

}  // namespace
}  // namespace evalbox::harness
