#include "adapters/noop/noop.h"

#include <gtest/gtest.h>

namespace evalbox::adapters {
namespace {

TEST(NoopAdapter, RunsNothingAndTakesNoSettings) {
  auto a = noop::make_adapter();
  harness::fixture_spec f;
  harness::candidate_spec c;
  c.id = "noop";
  c.adapter = "noop";
  EXPECT_TRUE(a->validate(c).empty());
  c.settings["model"] = {json("x"), {"suite.yaml", 7, 5}};
  auto errors = a->validate(c);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.line, 7);
  EXPECT_NE(errors[0].message().find("unknown setting 'model'"), std::string::npos);
  std::map<std::string, std::filesystem::path> creds;
  auto plan = a->plan({f, c, 0, "r", creds});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->argv, std::vector<std::string>{"/bin/true"});
  auto t = a->read_transcript({f, c, 0, "r", creds}, {harness::agent_output{}});
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->steps.empty());
  EXPECT_TRUE(t->completed);
}

TEST(NoopAdapter, RefusesSkillsServersAndHooksWhereTheyAreWritten) {
  harness::candidate_spec c;
  c.id = "noop";
  c.adapter = "noop";
  c.skills.push_back({"pdf", "/nonexistent", {}});
  c.skills_where = {"suite.yaml", 8, 5};
  c.mcp_servers.push_back({});
  c.mcp_servers_where = {"suite.yaml", 9, 5};
  auto errors = noop::make_adapter()->validate(c);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].message(),
            "suite.yaml:8:5: adapter noop cannot take skills: it runs no agent client (hint: "
            "remove skills from candidate noop)");
  EXPECT_EQ(errors[1].where.line, 9);
}

}  // namespace
}  // namespace evalbox::adapters
