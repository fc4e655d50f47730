// Golden error messages for bad input: each tests/data/config/{fixture,suite}/NAME.yaml is
// parsed and every message it yields must equal NAME.expected, line for line. Set
// EVALBOX_UPDATE_GOLDEN=1 to rewrite the .expected files (then read the diff).
#include <gtest/gtest.h>

#include "tests/support/golden.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/fs.h"
#include "harness/config/parse.h"
#include "harness/fixture/resolve.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

const fs::path data_dir = fs::path(EVALBOX_SOURCE_DIR) / "tests" / "data" / "config";
// The adapter names evalbox registers (harness/cli/registry.cpp).
const std::vector<std::string> adapters = {"claude-code", "codex", "command", "gemini",
                                           "loop",        "noop",  "oracle"};

std::vector<std::string> cases() {
  std::vector<std::string> out;
  for (auto kind : {"fixture", "suite"})
    for (const auto& e : fs::directory_iterator(data_dir / kind))
      if (e.path().extension() == ".yaml")
        out.push_back(std::string(kind) + "/" + e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

class golden : public ::testing::TestWithParam<std::string> {};

TEST_P(golden, messages_match) {
  fs::path yaml = data_dir / (GetParam() + ".yaml");
  fs::path expected_file = data_dir / (GetParam() + ".expected");
  auto text = read_file(yaml);
  ASSERT_TRUE(text) << text.error().message;
  std::vector<config_error> errors;
  std::string display = yaml.filename().string();
  if (GetParam().starts_with("fixture/")) {
    parse_fixture_yaml(*text, display, errors);
  } else {
    // As load_suite reads a suite: parsed, then its fixture entries resolved.
    auto spec = parse_suite_yaml(*text, display, yaml.parent_path(), adapters, errors);
    resolve_fixture_dirs(spec.fixture_entries, yaml.parent_path(), errors);
  }
  ASSERT_FALSE(errors.empty()) << GetParam() << " is bad input and must yield errors";
  std::string actual = join_messages(errors) + "\n";
  // Absolute paths in messages depend on the checkout; the goldens say <data>.
  for (size_t at; (at = actual.find(data_dir.string())) != std::string::npos;)
    actual.replace(at, data_dir.string().size(), "<data>");
  evalbox::testing::expect_golden(actual, expected_file);
}

INSTANTIATE_TEST_SUITE_P(config, golden, ::testing::ValuesIn(cases()), [](const auto& param_info) {
  std::string n = param_info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

}  // namespace
}  // namespace evalbox::harness
