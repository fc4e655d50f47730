// default_preparer_options: the evalbox process's one read of the sandbox's environment (the
// edge). Each variable keeps the meaning docs/cli.md gives it; an unset or empty one is the
// default, and the defaults are those of a preparer_options made by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/prepare/preparer.h"

namespace evalbox::sandbox {
namespace {

// Sets the variables (nullptr: unsets them) for the life of the object, then unsets them: each
// test here starts from an environment without them (ctest runs each in a process of its own).
class scoped_env {
 public:
  scoped_env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      names_.push_back(name);
      if (value) {
        ::setenv(name, value, 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  ~scoped_env() {
    for (const char* name : names_) ::unsetenv(name);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::vector<const char*> names_;
};

TEST(DefaultPreparerOptions, UnsetOrEmptyVariablesGiveTheDefaults) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    scoped_env env{{"EVALBOX_HELPER", value},
                   {"EVALBOX_WARM_HELPER", value},
                   {"EVALBOX_CGROUP_V2_ROOT", value},
                   {"EVALBOX_CGROUP_AHEAD", value},
                   {"EVALBOX_IMAGE_MAX_LAYER_BYTES", value},
                   {"EVALBOX_IMAGE_MAX_LAYER_ENTRIES", value}};
    const preparer_options o = default_preparer_options();
    const launch_settings defaults;
    const char* what = value ? "empty" : "unset";
    EXPECT_EQ(o.launch.helper, defaults.helper) << what;
    EXPECT_TRUE(o.launch.helper.empty()) << what;
    EXPECT_TRUE(o.launch.warm_helper) << what;
    EXPECT_TRUE(defaults.warm_helper);
    EXPECT_TRUE(o.launch.cgroup_v2_root.empty()) << what;
    EXPECT_TRUE(defaults.cgroup_v2_root.empty());
    EXPECT_TRUE(o.launch.cgroup_ahead) << what;
    EXPECT_TRUE(defaults.cgroup_ahead);
    EXPECT_EQ(o.image_max_layer_bytes, "") << what;
    EXPECT_EQ(o.image_max_layer_entries, "") << what;
  }
}

TEST(DefaultPreparerOptions, ReadsTheLaunchSettingsFromTheirVariables) {
  scoped_env env{{"EVALBOX_HELPER", "/opt/evalbox/evalbox-sandbox"},
                 {"EVALBOX_WARM_HELPER", "0"},
                 {"EVALBOX_CGROUP_V2_ROOT", "/sys/fs/cgroup/unified"},
                 {"EVALBOX_CGROUP_AHEAD", "0"}};
  const preparer_options o = default_preparer_options();
  EXPECT_EQ(o.launch.helper, "/opt/evalbox/evalbox-sandbox");
  EXPECT_FALSE(o.launch.warm_helper);
  EXPECT_EQ(o.launch.cgroup_v2_root, "/sys/fs/cgroup/unified");
  EXPECT_FALSE(o.launch.cgroup_ahead);
}

// Only "0" turns the warm helper or the cgroups made ahead off; anything else leaves them on.
TEST(DefaultPreparerOptions, OnlyZeroTurnsAWarmHelperOrCgroupsMadeAheadOff) {
  for (const char* value : {"1", "no", "false", "00"}) {
    scoped_env env{{"EVALBOX_WARM_HELPER", value}, {"EVALBOX_CGROUP_AHEAD", value}};
    const preparer_options o = default_preparer_options();
    EXPECT_TRUE(o.launch.warm_helper) << value;
    EXPECT_TRUE(o.launch.cgroup_ahead) << value;
  }
}

// The layer limits' texts travel as given; the store parses them when it is first opened.
TEST(DefaultPreparerOptions, CarriesTheImageLayerLimitsAsGiven) {
  scoped_env env{{"EVALBOX_IMAGE_MAX_LAYER_BYTES", "lots"},
                 {"EVALBOX_IMAGE_MAX_LAYER_ENTRIES", "77"}};
  const preparer_options o = default_preparer_options();
  EXPECT_EQ(o.image_max_layer_bytes, "lots");
  EXPECT_EQ(o.image_max_layer_entries, "77");
}

TEST(DefaultPreparerOptions, StateRootFromEvalboxStateDirFirst) {
  scoped_env env{{"EVALBOX_STATE_DIR", "/srv/evalbox-state"}, {"XDG_STATE_HOME", "/xdg"}};
  EXPECT_EQ(default_preparer_options().state_root, "/srv/evalbox-state");
}

TEST(DefaultPreparerOptions, StateRootWithoutEvalboxStateDir) {
  scoped_env env{{"EVALBOX_STATE_DIR", ""}, {"XDG_STATE_HOME", "/xdg"}, {"HOME", "/home/u"}};
  EXPECT_EQ(default_preparer_options().state_root,
            ::geteuid() == 0 ? "/var/lib/evalbox" : "/xdg/evalbox");
}

TEST(DefaultPreparerOptions, TheSandboxIdAsRootIsEvalboxSandboxUidWhenValid) {
  if (::geteuid() != 0) {
    scoped_env env{{"EVALBOX_SANDBOX_UID", "61000"}};
    const preparer_options o = default_preparer_options();
    EXPECT_EQ(o.sandbox_uid, ::getuid()) << "without root: the caller's own ids";
    EXPECT_EQ(o.sandbox_gid, ::getgid());
    return;
  }
  {
    scoped_env env{{"EVALBOX_SANDBOX_UID", "61000"}};
    const preparer_options o = default_preparer_options();
    EXPECT_EQ(o.sandbox_uid, 61000u);
    EXPECT_EQ(o.sandbox_gid, 61000u);
  }
  for (const char* ignored : {"0", "-5", "2147483647", ""}) {
    scoped_env env{{"EVALBOX_SANDBOX_UID", ignored}};
    EXPECT_EQ(default_preparer_options().sandbox_uid, 60000u) << ignored;
  }
}

}  // namespace
}  // namespace evalbox::sandbox
