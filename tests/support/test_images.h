// Test support: the images tests run in (tests/images/make-images, built once and cached under
// $EVALBOX_IMAGE_CACHE). busybox needs nothing but the host's busybox-static; debian needs
// Debian's mirror the first time.
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

namespace evalbox::testing {

// The directory make-images printed for `name` ("busybox", "debian"), or empty when the build
// failed (its stderr went to the test's). Cached per process.
inline std::filesystem::path test_image_dir(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::filesystem::path> built;
  std::lock_guard lock(mu);
  if (auto it = built.find(name); it != built.end()) return it->second;
  const std::string cmd = std::string(EVALBOX_SOURCE_DIR) + "/tests/images/make-images " + name;
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (::pclose(p) != 0) out.clear();
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return built[name] = std::filesystem::path(out);
}

// "oci:<dir>/oci:latest" for `name`, or empty.
inline std::string test_image_ref(const std::string& name) {
  auto dir = test_image_dir(name);
  return dir.empty() ? std::string() : "oci:" + (dir / "oci").string() + ":latest";
}

}  // namespace evalbox::testing
