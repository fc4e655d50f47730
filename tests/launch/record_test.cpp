// Contract of the run record (evalbox.run-record.v1) and the launch plan: golden keys, and a
// round trip that loses nothing.
#include <gtest/gtest.h>

#include "sandbox/launch/plan.h"
#include "sandbox/launch/run_record.h"

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
  r.mechanisms = {{"cgroup", "v1"}, {"landlock_abi", 7}};
  r.binding_digest = std::string(64, 'a');
  r.connections.push_back({"127.0.0.1:8080", true, "relay", ""});
  r.connections.push_back({"example.com:443", false, "proxy", "not in the allow-list"});
  return r;
}

TEST(run_record_contract, has_exactly_the_documented_keys) {
  json j = sample().to_json();
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"binding_digest", "connections", "cpu_ms", "error",
                                            "error_step", "exit_code", "mechanisms", "outcome",
                                            "output_bytes", "output_truncated", "peak_memory_bytes",
                                            "pids_limit_hit", "schema", "signal", "wall_ms"}));
  EXPECT_EQ(j["schema"], "evalbox.run-record.v1");
  EXPECT_EQ(j["outcome"], "signaled");
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["signal"], 9);
  EXPECT_TRUE(j["error"].is_null());
}

TEST(run_record_contract, round_trips) {
  const run_record r = sample();
  auto back = run_record::from_json(r.to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_json(), r.to_json());
}

TEST(run_record_contract, an_error_has_no_outcome) {
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

TEST(run_record_contract, rejects_other_schemas_and_unknown_outcomes) {
  json j = sample().to_json();
  j["schema"] = "evalbox.run-record.v2";
  EXPECT_FALSE(run_record::from_json(j));
  j = sample().to_json();
  j["outcome"] = "escaped";
  EXPECT_FALSE(run_record::from_json(j));
}

// Found by fuzzing (tests/fuzz/regressions/run_record): an exit code of 1e300 was converted to
// int with undefined behaviour, and a negative byte count was read as 2^64 - n.
TEST(run_record_contract, rejects_numbers_out_of_their_range) {
  for (const char* key : {"exit_code", "signal"}) {
    json j = sample().to_json();
    j[key] = json::parse("1e300");
    EXPECT_FALSE(run_record::from_json(j)) << key;
    j[key] = int64_t{1} << 40;
    EXPECT_FALSE(run_record::from_json(j)) << key;
  }
  for (const char* key : {"wall_ms", "cpu_ms", "peak_memory_bytes", "output_bytes"}) {
    json j = sample().to_json();
    j[key] = -5;
    EXPECT_FALSE(run_record::from_json(j)) << key;
    j[key] = 2.5;
    EXPECT_FALSE(run_record::from_json(j)) << key;
  }
}

TEST(launch_plan_contract, round_trips) {
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

TEST(launch_plan_contract, names_a_missing_field) {
  json j = launch_plan{.argv = {"/bin/true"}}.to_json();
  j.erase("workspace_dir");
  auto p = launch_plan::from_json(j);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("workspace_dir"), std::string::npos);
}

}  // namespace
}  // namespace evalbox::sandbox
