// Contract of the run record (evalbox.run-record.v1) and the launch plan: golden keys, and a
// round trip that loses nothing.
#include <gtest/gtest.h>

#include "sandbox/protocol/launch_plan.h"
#include "sandbox/protocol/run_record.h"

namespace evalbox::sandbox {
namespace {

run_record sample() {
  run_record r;
  r.outcome = outcome_kind::signaled;
  r.signal = 9;
  r.wall_ms = 1200;
  r.cpu_ms = 800;
  r.peak_memory_bytes = 1 << 20;
  r.output_bytes = 42;
  r.output_truncated = true;
  r.pids_limit_hit = true;
  r.oom_kills = 2;
  r.disk_limit_hit = true;
  r.mechanisms = {{"cgroup", "v1"}, {"landlock_abi", 7}};
  r.binding_digest = std::string(64, 'a');
  r.connections.push_back({"127.0.0.1:8080", true, "relay", ""});
  r.connections.push_back({"example.com:443", false, "proxy", "not in the allow-list"});
  return r;
}

TEST(RunRecordContract, HasExactlyTheDocumentedKeys) {
  json j = sample().to_json();
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"binding_digest", "connections", "cpu_ms",
                                            "disk_limit_hit", "error", "error_step", "exit_code",
                                            "mechanisms", "oom_kills", "outcome", "output_bytes",
                                            "output_truncated", "peak_memory_bytes",
                                            "pids_limit_hit", "schema", "signal", "wall_ms"}));
  EXPECT_EQ(j["schema"], "evalbox.run-record.v1");
  EXPECT_EQ(j["outcome"], "signaled");
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["signal"], 9);
  EXPECT_TRUE(j["error"].is_null());
}

TEST(RunRecordContract, RoundTrips) {
  const run_record r = sample();
  auto back = run_record::from_json(r.to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_json(), r.to_json());
}

// oom_kills and disk_limit_hit came to v1 later: a record without them reads as none.
TEST(RunRecordContract, ARecordFromBeforeOomKillsAndDiskLimitHitReadsAsNone) {
  json j = sample().to_json();
  j.erase("oom_kills");
  j.erase("disk_limit_hit");
  auto back = run_record::from_json(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->oom_kills, 0u);
  EXPECT_FALSE(back->disk_limit_hit);
  j["oom_kills"] = -1;
  EXPECT_FALSE(run_record::from_json(j));
}

TEST(RunRecordContract, AnErrorHasNoOutcome) {
  run_record r;
  r.error = "step bind /workspace: ENOENT: No such file or directory";
  r.error_step = "bind /workspace";
  json j = r.to_json();
  EXPECT_TRUE(j["outcome"].is_null());
  EXPECT_TRUE(j["exit_code"].is_null());
  auto back = run_record::from_json(j);
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->ok());
  EXPECT_EQ(back->error_step, "bind /workspace");
}

// A record that cannot be read says why: the launcher's error carries the reason.
std::string refusal(const json& j) {
  auto r = run_record::from_json(j);
  if (r) return "<accepted>";
  EXPECT_EQ(r.error().kind, error_kind::invalid_argument);
  return r.error().message;
}

TEST(RunRecordContract, RejectsOtherSchemasAndUnknownOutcomes) {
  json j = sample().to_json();
  j["schema"] = "evalbox.run-record.v2";
  EXPECT_EQ(refusal(j), "run record: schema is 'evalbox.run-record.v2', not evalbox.run-record.v1");
  j = sample().to_json();
  j["outcome"] = "escaped";
  EXPECT_EQ(refusal(j), "run record: unknown outcome 'escaped'");
}

TEST(RunRecordContract, SaysWhichFieldIsMissingOrMistyped) {
  json j = sample().to_json();
  j.erase("wall_ms");
  EXPECT_EQ(refusal(j), "run record: missing field 'wall_ms'");
  j = sample().to_json();
  j["output_truncated"] = "yes";
  EXPECT_EQ(refusal(j), "run record: field 'output_truncated' is a string, not a boolean");
  j = sample().to_json();
  j["connections"][0].erase("via");
  EXPECT_EQ(refusal(j), "run record: missing field 'via'");
  j = sample().to_json();
  j["connections"] = "none";
  EXPECT_EQ(refusal(j), "run record: connections is not an array");
}

TEST(RunRecordContract, NeedsAnOutcomeOrAnError) {
  json j = sample().to_json();
  j["outcome"] = nullptr;
  EXPECT_EQ(refusal(j), "run record: neither an outcome nor an error (both are null)");
  EXPECT_EQ(refusal(json::array()), "run record: not a JSON object");
  EXPECT_EQ(refusal(json::object()), "run record: missing field 'schema'");
}

// Found by fuzzing (tests/fuzz/regressions/run_record): an exit code of 1e300 was converted to
// int with undefined behaviour, and a negative byte count was read as 2^64 - n.
TEST(RunRecordContract, RejectsNumbersOutOfTheirRange) {
  for (const char* key : {"exit_code", "signal"}) {
    json j = sample().to_json();
    j[key] = json::parse("1e300");
    EXPECT_NE(
        refusal(j).find(fmt::format("run record: field '{}' is a number, not an integer", key)),
        std::string::npos)
        << key << ": " << refusal(j);
    j[key] = int64_t{1} << 40;
    EXPECT_NE(refusal(j).find("is out of range"), std::string::npos) << key;
  }
  for (const char* key : {"wall_ms", "cpu_ms", "peak_memory_bytes", "output_bytes"}) {
    json j = sample().to_json();
    j[key] = -5;
    EXPECT_NE(refusal(j).find("is out of range"), std::string::npos) << key;
    j[key] = 2.5;
    EXPECT_NE(refusal(j).find("is a number, not an integer"), std::string::npos) << key;
  }
}

TEST(LaunchPlanContract, RoundTrips) {
  launch_plan p;
  p.run_id = "r1";
  p.seq = 3;
  p.host_uid = 60000;
  p.host_gid = 60001;
  p.root_dir = "/s/root";
  p.workspace_dir = "/s/ws";
  p.home_dir = "/s/home";
  p.mounts.push_back({"/creds/lease", "/home/agent/.codex/auth.json", true, true});
  p.argv = {"/bin/sh", "-c", "true"};
  p.env = {{"PATH", "/usr/bin"}};
  p.network.mode = network_mode::allow;
  p.network.allow = {"127.0.0.1:8080"};
  p.limits.pids = 64;
  auto back = launch_plan::from_json(p.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->to_json(), p.to_json());
}

TEST(LaunchPlanContract, NamesAMissingField) {
  json j = launch_plan{.argv = {"/bin/true"}}.to_json();
  j.erase("workspace_dir");
  auto p = launch_plan::from_json(j);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("workspace_dir"), std::string::npos);
}

TEST(LaunchPlanContract, RefusesAnUnknownNetworkMode) {
  json j = launch_plan{.argv = {"/bin/true"}}.to_json();
  j["network"]["mode"] = "bridge";
  auto p = launch_plan::from_json(j);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, "launch plan: network mode bridge");
}

}  // namespace
}  // namespace evalbox::sandbox
