// A credential's requests_per_minute: at most N requests in any window, first come first served
// (reservations computed on a clock the test gives), a request over it waits for its slot, and a
// stopped run's waiting request gives up.
#include "harness/gateway/rate_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace evalbox::harness::gateway {
namespace {

using namespace std::chrono_literals;
using clock_type = request_rate::clock;

TEST(RequestRate, AtMostNInAnyWindowInTheOrderTheyCame) {
  request_rate rate(2, 60s);
  const auto t = clock_type::time_point{} + 1h;
  EXPECT_EQ(rate.reserve(t), t);
  EXPECT_EQ(rate.reserve(t + 1s), t + 1s);
  EXPECT_EQ(rate.reserve(t + 2s), t + 60s) << "the third waits for the first's window";
  EXPECT_EQ(rate.reserve(t + 3s), t + 61s) << "the fourth for the second's";
  EXPECT_EQ(rate.reserve(t + 4s), t + 120s) << "the fifth for the third's slot, not its arrival";
  // Long after: the window holds nobody, a request goes at once.
  EXPECT_EQ(rate.reserve(t + 10min), t + 10min);
  EXPECT_EQ(rate.reserve(t + 10min), t + 10min);
  EXPECT_EQ(rate.reserve(t + 10min), t + 11min);
}

TEST(RequestRate, NoSlotIsEverEarlierThanOneReservedBefore) {
  request_rate rate(3, 60s);
  const auto t = clock_type::time_point{} + 1h;
  auto last = clock_type::time_point{};
  for (int i = 0; i < 50; ++i) {
    const auto slot = rate.reserve(t + std::chrono::seconds(i % 7));
    EXPECT_GE(slot, last) << i;
    last = slot;
  }
  // 50 requests at 3 a minute: the 50th goes 16 windows after the 2nd.
  EXPECT_EQ(last, t + 16min + 1s);
}

TEST(RequestRate, ARequestOverTheRateWaitsAndAStoppedOneGivesUp) {
  request_rate rate(1, 300ms);
  auto first = rate.acquire(nullptr);
  ASSERT_TRUE(first);
  EXPECT_LT(*first, 300ms) << "the first goes at once";
  auto second = rate.acquire(nullptr);
  ASSERT_TRUE(second);
  EXPECT_GE(*second, 200ms) << "the second waited for the window";
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    stop = true;
  });
  EXPECT_FALSE(rate.acquire(&stop)) << "stopped while it waited";
  stopper.join();
}

}  // namespace
}  // namespace evalbox::harness::gateway
