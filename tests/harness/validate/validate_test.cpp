// validate.h: `evalbox validate` as a library — fixtures and suites checked without running,
// every problem with its place, the report as evalbox.validate.v1. No image, so no store.
#include "harness/validate/validate.h"

#include <gtest/gtest.h>

#include "base/fs.h"
#include "base/json.h"
#include "base/json_get.h"
#include "base/units.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

// An adapter whose only setting is `model`: anything else is refused, as real adapters do.
class strict_adapter : public adapter {
 public:
  std::string_view id() const override { return "strict"; }
  std::vector<config_error> validate(const candidate_spec& c) const override {
    std::vector<config_error> out;
    for (const auto& [key, value] : c.settings)
      if (key != "model") out.push_back(unknown_setting(c, key, {"model"}));
    return out;
  }
  result<agent_plan> plan(const run_context&) const override {
    return make_error(error_kind::internal, "not planned in these tests");
  }
  result<transcript> read_transcript(const run_context&,
                                     const std::vector<agent_output>&) const override {
    return transcript{};
  }
};

class Validate : public ::testing::Test {
 protected:
  void SetUp() override {
    adapters_.add(std::make_unique<strict_adapter>());
    options_.adapters = &adapters_;
    options_.state_root = dir_.path() / "state";
    options_.preparer = []() -> sandbox::preparer& {
      ADD_FAILURE() << "no input here names an image: the store must not be opened";
      std::abort();
    };
  }
  static fs::path example(const char* name) {
    return fs::path(EVALBOX_SOURCE_DIR) / "fixtures/examples" / name;
  }
  fs::path write(const std::string& name, const std::string& text) {
    auto p = dir_.path() / name;
    EXPECT_TRUE(make_dirs(p.parent_path()));
    EXPECT_TRUE(write_file(p, text));
    return p;
  }
  temp_dir dir_{"evalbox-validate"};
  adapter_registry adapters_;
  validate_options options_;
};

TEST_F(Validate, AFixtureDirectoryIsLoadedWithItsChecksAndDigest) {
  auto report = validate_inputs({example("off-by-one").string()}, options_);
  ASSERT_EQ(report.inputs.size(), 1u);
  const auto& in = report.inputs[0];
  EXPECT_TRUE(in.valid()) << (in.errors.empty() ? "" : in.errors[0].message());
  EXPECT_EQ(in.what, validated_input::kind::fixture);
  EXPECT_EQ(in.id, "off-by-one");
  EXPECT_EQ(in.digest.size(), 64u);
  EXPECT_TRUE(in.summary.starts_with("fixture off-by-one: ")) << in.summary;
  EXPECT_TRUE(report.valid());
}

TEST_F(Validate, ASuiteNamesEachBadCandidateSettingAtItsLine) {
  auto suite = write("suite.yaml",
                     "schema: evalbox.suite.v1\n"
                     "name: s\n"
                     "fixtures: [" +
                         example("off-by-one").string() +
                         "]\n"
                         "candidates:\n"
                         "  - {id: a, adapter: strict, model: m}\n"
                         "  - {id: b, adapter: strict, modle: m}\n");
  auto report = validate_inputs({suite.string()}, options_);
  const auto& in = report.inputs.at(0);
  EXPECT_EQ(in.what, validated_input::kind::suite);
  ASSERT_EQ(in.errors.size(), 1u);
  EXPECT_EQ(in.errors[0].where.line, 6) << in.errors[0].message();
  EXPECT_NE(in.errors[0].message().find("modle"), std::string::npos);
  EXPECT_FALSE(report.valid());
}

TEST_F(Validate, AnAdapterNobodyHasIsAProblemOfTheSuite) {
  auto suite = write("suite.yaml",
                     "schema: evalbox.suite.v1\n"
                     "name: s\n"
                     "fixtures: [" +
                         example("off-by-one").string() +
                         "]\n"
                         "candidates: [{id: a, adapter: nosuch}]\n");
  auto report = validate_inputs({suite.string()}, options_);
  ASSERT_FALSE(report.inputs.at(0).valid());
  EXPECT_NE(report.inputs[0].errors[0].message().find("nosuch"), std::string::npos);
}

TEST_F(Validate, AFixtureFileAloneIsCheckedWithoutItsDirectory) {
  auto text = read_file(example("off-by-one") / "fixture.yaml");
  ASSERT_TRUE(text);
  auto file = write("copy-of-fixture.yml", *text);
  auto report = validate_inputs({file.string()}, options_);
  const auto& in = report.inputs.at(0);
  EXPECT_TRUE(in.valid()) << (in.errors.empty() ? "" : in.errors[0].message());
  EXPECT_TRUE(in.summary.ends_with("(directory not checked)")) << in.summary;
  EXPECT_TRUE(in.digest.empty());
}

TEST_F(Validate, WhatCannotBeReadIsAProblemNotACrash) {
  auto report = validate_inputs(
      {(dir_.path() / "missing.yaml").string(), write("garbage.yaml", "{{{{ not yaml").string(),
       write("empty/fixture.yaml", "").parent_path().string()},
      options_);
  ASSERT_EQ(report.inputs.size(), 3u);
  for (const auto& in : report.inputs) EXPECT_FALSE(in.valid()) << in.path;
}

TEST_F(Validate, TheJsonReportIsTheValidateV1Contract) {
  auto bad = write("suite.yaml", "schema: evalbox.suite.v1\nname: s\n");
  auto report = validate_inputs({example("off-by-one").string(), bad.string()}, options_);
  const json j = to_json(report);
  EXPECT_EQ(json_value_or(j, "schema", ""), "evalbox.validate.v1");
  EXPECT_EQ(json_value_or(j, "valid", true), false);
  const json& inputs = json_member(j, "inputs");
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(json_value_or(inputs.at(0), "kind", ""), "fixture");
  EXPECT_EQ(json_value_or(inputs.at(0), "id", ""), "off-by-one");
  EXPECT_TRUE(json_value_or(inputs.at(0), "valid", false));
  EXPECT_TRUE(json_member(inputs.at(0), "images").is_array());
  EXPECT_EQ(json_value_or(inputs.at(1), "kind", ""), "suite");
  const json& errors = json_member(inputs.at(1), "errors");
  ASSERT_FALSE(errors.empty());
  for (const char* key : {"file", "line", "column", "message", "hint"})
    EXPECT_TRUE(errors.at(0).contains(key)) << key;
}

TEST(ValidatedImage, DescribesWhatRunsWillUse) {
  validated_image i;
  i.reference = "oci:/images/py313:latest";
  i.id = "sha256:0123456789abcdef0123";
  i.layers = {"a", "b"};
  i.bytes = 3u << 20;
  i.env = {"LANG=C", "PATH=/usr/bin:/bin"};
  i.imported_now = true;
  EXPECT_EQ(describe(i), "  image oci:/images/py313:latest: sha256:0123456789ab (2 layer(s), " +
                             format_bytes(3u << 20) +
                             ", imported now; WorkingDir none, PATH /usr/bin:/bin)");
}

}  // namespace
}  // namespace evalbox::harness
