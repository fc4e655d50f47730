// A session's start request read one way for `evalbox session start` and `evalbox serve`: every
// source and limit checked, the refusals named, and the limits a session's sandbox gets.
#include "harness/runner/session_start.h"

#include <gtest/gtest.h>

namespace evalbox::harness {
namespace {

using namespace std::chrono_literals;

TEST(SessionSpec, ReadsEachSourceWithItsDefaults) {
  auto ws = session_spec_of({{"workspace", "/repo"}});
  ASSERT_TRUE(ws) << ws.error().message;
  EXPECT_EQ(ws->workspace, "/repo");
  EXPECT_EQ(ws->ttl, 1h);
  EXPECT_EQ(ws->network, "none");
  EXPECT_FALSE(ws->cpu);
  EXPECT_FALSE(ws->owner);
  auto img = session_spec_of({{"image", "docker://python:3.13"}, {"workspace", "/repo"}});
  ASSERT_TRUE(img) << img.error().message;
  EXPECT_EQ(img->image, "docker://python:3.13");
  auto fx =
      session_spec_of({{"fixture", "/f"}, {"suite", "/s.yaml"}, {"candidate", "c"}, {"owner", 42}});
  ASSERT_TRUE(fx) << fx.error().message;
  EXPECT_EQ(fx->candidate, "c");
  EXPECT_EQ(fx->owner, 42);
}

TEST(SessionSpec, ATtlIsADurationOrSeconds) {
  EXPECT_EQ(session_spec_of({{"workspace", "/w"}, {"ttl", "30m"}})->ttl, 30min);
  EXPECT_EQ(session_spec_of({{"workspace", "/w"}, {"ttl", 90}})->ttl, 90s);
  EXPECT_EQ(session_spec_of({{"workspace", "/w"}, {"ttl", 0.5}})->ttl, 500ms);
  for (const json& bad : {json(0), json(-1), json("forever"), json(8 * 24 * 3600), json(true)}) {
    auto s = session_spec_of({{"workspace", "/w"}, {"ttl", bad}});
    ASSERT_FALSE(s) << bad.dump();
    EXPECT_EQ(s.error().kind, error_kind::invalid_argument);
    EXPECT_NE(s.error().message.find("ttl"), std::string::npos) << s.error().message;
  }
}

TEST(SessionSpec, RefusesWhatCannotBeStarted) {
  const std::pair<json, std::string_view> cases[] = {
      {json::object(), "give a fixture"},
      {{{"fixture", "/f"}, {"image", "i"}}, "drop image"},
      {{{"fixture", "/f"}, {"workspace", "/w"}}, "drop image"},
      {{{"fixture", "/f"}, {"candidate", "c"}}, "needs its suite"},
      {{{"workspace", "/w"}, {"memory", "lots"}}, "memory"},
      {{{"workspace", "/w"}, {"disk", "-1GiB"}}, "disk"},
      {{{"workspace", "/w"}, {"cpu", "soon"}}, "cpu"},
      {{{"workspace", "/w"}, {"network", "everything"}}, "network"},
      {{{"workspace", "/w"}, {"pull", "sometimes"}}, "pull"},
      {{{"workspace", "/w"}, {"owner", 0}}, "owner"},
      {{{"workspace", "/w"}, {"pids", "many"}}, "pids"},
      {{{"workspace", "/w"}, {"wokspace", "/w"}}, "unknown field 'wokspace'"},
      {json::array(), "not an object"},
  };
  for (const auto& [request, says] : cases) {
    auto s = session_spec_of(request);
    ASSERT_FALSE(s) << request.dump();
    EXPECT_EQ(s.error().kind, error_kind::invalid_argument) << request.dump();
    EXPECT_NE(s.error().message.find(says), std::string::npos)
        << request.dump() << ": " << s.error().message;
  }
}

TEST(SessionSpec, RoundTripsThroughItsJson) {
  auto s = session_spec_of({{"image", "oci:img"},
                            {"workspace", "/w"},
                            {"ttl", "2h"},
                            {"cpu", "5m"},
                            {"owner", 7},
                            {"pids", 64},
                            {"landlock", false},
                            {"network", "allow:127.0.0.1:8080"},
                            {"pull", "never"}});
  ASSERT_TRUE(s) << s.error().message;
  auto again = session_spec_of(s->to_json());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->to_json(), s->to_json());
  EXPECT_EQ(again->ttl, 2h);
  EXPECT_EQ(again->cpu, "5m");
  EXPECT_FALSE(again->landlock);
}

TEST(SessionLimits, TheTtlIsTheWallLimitAndCpuOnlyWhenAsked) {
  sandbox::resource_limits request;
  request.wall_ms = 600000;
  request.cpu_ms = 600000;
  request.memory_bytes = 1 << 30;
  auto s = session_spec_of({{"workspace", "/w"}, {"ttl", "10m"}});
  const auto l = session_limits(request, *s);
  EXPECT_EQ(l.wall_ms, 600000u + 60000u);  // a minute past the server's own end of it
  EXPECT_EQ(l.cpu_ms, 0u);                 // shared by every exec: none unless asked
  EXPECT_EQ(l.memory_bytes, 1u << 30);
  auto with_cpu = session_spec_of({{"workspace", "/w"}, {"cpu", "2m"}});
  EXPECT_EQ(session_limits(request, *with_cpu).cpu_ms, 120000u);
}

}  // namespace
}  // namespace evalbox::harness
