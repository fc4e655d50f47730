// Test support: feature probes shared by the sandbox tests.
#include "tests/support/isolation.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace evalbox::testing {

bool isolation_required() {
  const char* v = std::getenv("EVALBOX_REQUIRE_ISOLATION");
  return v && std::string_view(v) == "1";
}

const sys::host_features& host() {
  static const sys::host_features features = [] {
    const char* tmp = std::getenv("TMPDIR");
    return sys::probe_host(std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                           "evalbox-test-probe");
  }();
  return features;
}

bool mounted_below(const std::filesystem::path& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.find(" " + dir.string()) != std::string::npos) return true;
  return false;
}

}  // namespace evalbox::testing
