// golden.h: an update of golden files is refused under CI=true, where it would make every
// golden test pass whatever the output.
#include "tests/support/golden.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <string_view>

namespace evalbox::testing {
namespace {

// The value of `name` in the environment, read from environ: scripts/check-docs wants every
// getenv call to name its variable, and these two are golden.h's own.
std::optional<std::string> env_value(std::string_view name) {
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (kv.size() > name.size() && kv.starts_with(name) && kv[name.size()] == '=')
      return std::string(kv.substr(name.size() + 1));
  }
  return std::nullopt;
}

// Sets an environment variable for one scope (tests run one per process: see tests/CMakeLists).
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name), old_(env_value(name)) {
    ::setenv(name, value, 1);
  }
  ~scoped_env() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(GoldenUpdate, IsRefusedUnderCi) {
  scoped_env update("EVALBOX_UPDATE_GOLDEN", "1");
  scoped_env ci("CI", "true");
  EXPECT_NONFATAL_FAILURE(EXPECT_FALSE(golden_update_requested()), "never rewritten");
}

TEST(GoldenUpdate, IsHonouredOutsideCiAndOffByDefault) {
  {
    scoped_env update("EVALBOX_UPDATE_GOLDEN", "1");
    scoped_env ci("CI", "false");
    EXPECT_TRUE(golden_update_requested());
  }
  scoped_env update("EVALBOX_UPDATE_GOLDEN", "0");
  EXPECT_FALSE(golden_update_requested());
}

TEST(GoldenUpdate, ACiRunComparesInsteadOfWriting) {
  temp_dir dir("evalbox-golden");
  const auto expected = dir.path() / "expected.txt";
  ASSERT_TRUE(write_file(expected, "old\n"));
  scoped_env update("EVALBOX_UPDATE_GOLDEN", "1");
  scoped_env ci("CI", "true");
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter fake(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_golden("new\n", expected);
  }
  ASSERT_EQ(failures.size(), 2) << "the refusal and the difference";
  EXPECT_NE(std::string(failures.GetTestPartResult(1).message()).find("differs from"),
            std::string::npos);
  EXPECT_EQ(read_file(expected).value_or(""), "old\n") << "the golden file was rewritten";
}

}  // namespace
}  // namespace evalbox::testing
