// Which shard a process runs: --shard K/N, or K from the scheduler's environment.
#include "harness/plan/shard.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace evalbox::harness {
namespace {

struct fake_env {
  std::map<std::string, std::string> vars;
  env_lookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

result<shard_choice> resolve(std::string_view flag, std::map<std::string, std::string> vars) {
  fake_env env{std::move(vars)};
  return resolve_shard(flag, env.lookup());
}

std::string error_of(std::string_view flag, std::map<std::string, std::string> vars) {
  auto r = resolve(flag, std::move(vars));
  EXPECT_FALSE(r) << flag;
  return r ? std::string() : r.error().message;
}

TEST(Shard, NoFlagNoVariableIsOneShard) {
  auto r = resolve("", {{"SLURM_ARRAY_TASK_ID", "3"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->count, 1) << "an array task id alone (no EVALBOX_SHARDS) does not shard";
  EXPECT_EQ(r->source, "");
}

TEST(Shard, ExplicitKOverN) {
  auto r = resolve("2/5", {{"SLURM_ARRAY_TASK_ID", "0"}, {"EVALBOX_SHARDS", "9"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->index, 2);
  EXPECT_EQ(r->count, 5) << "the flag wins over the environment";
  EXPECT_EQ(r->source, "--shard");
}

TEST(Shard, AutoTakesKFromSlurmOrKubernetes) {
  auto slurm = resolve("auto/4", {{"SLURM_ARRAY_TASK_ID", "3"}});
  ASSERT_TRUE(slurm) << slurm.error().message;
  EXPECT_EQ(slurm->index, 3);
  EXPECT_EQ(slurm->count, 4);
  EXPECT_EQ(slurm->source, "SLURM_ARRAY_TASK_ID");
  auto k8s = resolve("auto/4", {{"JOB_COMPLETION_INDEX", "1"}});
  ASSERT_TRUE(k8s);
  EXPECT_EQ(k8s->index, 1);
  EXPECT_EQ(k8s->source, "JOB_COMPLETION_INDEX");
  auto both = resolve("auto/4", {{"JOB_COMPLETION_INDEX", "2"}, {"SLURM_ARRAY_TASK_ID", "2"}});
  ASSERT_TRUE(both) << "both set and agreeing is fine";
  EXPECT_EQ(both->index, 2);
}

TEST(Shard, EvalboxShardsIsAutoWithoutTheFlag) {
  auto r = resolve("", {{"EVALBOX_SHARDS", "3"}, {"JOB_COMPLETION_INDEX", "2"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->index, 2);
  EXPECT_EQ(r->count, 3);
}

TEST(Shard, ClearErrors) {
  EXPECT_NE(error_of("auto/3", {}).find("neither SLURM_ARRAY_TASK_ID"), std::string::npos);
  EXPECT_NE(error_of("", {{"EVALBOX_SHARDS", "3"}}).find("EVALBOX_SHARDS=3"), std::string::npos)
      << "EVALBOX_SHARDS outside a scheduler is refused, not ignored";
  auto both = error_of("auto/3", {{"SLURM_ARRAY_TASK_ID", "0"}, {"JOB_COMPLETION_INDEX", "1"}});
  EXPECT_NE(both.find("SLURM_ARRAY_TASK_ID says shard 0 but JOB_COMPLETION_INDEX says 1"),
            std::string::npos)
      << both;
  auto big = error_of("auto/3", {{"SLURM_ARRAY_TASK_ID", "3"}});
  EXPECT_NE(big.find("indices 0-2"), std::string::npos) << big;
  EXPECT_NE(error_of("auto/3", {{"JOB_COMPLETION_INDEX", "x1"}}).find("not a shard index"),
            std::string::npos);
  for (const char* bad :
       {"3/3", "1/0", "-1/3", "1/3x", "a/b", "auto", "1", "/3", "auto/-2", "99999999999/3"})
    EXPECT_NE(error_of(bad, {}).find("write K/N"), std::string::npos) << bad;
  EXPECT_NE(error_of("", {{"EVALBOX_SHARDS", "zero"}}).find("the number of shards"),
            std::string::npos);
}

}  // namespace
}  // namespace evalbox::harness
