#include "tests/sandbox/image/image_test_support.h"

#include <cstdio>
#include <stdexcept>

namespace evalbox::testing::image {

std::filesystem::path made_image(const std::string& name) {
  std::string cmd = std::string(EVALBOX_SOURCE_DIR) + "/tests/images/make-images " + name;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen make-images");
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n')) out.pop_back();
  if (rc != 0 || out.empty()) throw std::runtime_error("make-images " + name + " failed");
  auto nl = out.rfind('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

}  // namespace evalbox::testing::image
