// Shared set-up for the image store tests: a scratch directory holding a store and, beside
// it, a canary directory that no import may touch.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "base/fs.h"
#include "sandbox/image/store.h"
#include "tests/sandbox/image/builder.h"

namespace evalbox::testing::image {

namespace img = evalbox::sandbox::image;

// The id every unpacked entry belongs to: the sandbox id as root, ourselves otherwise.
inline uid_t test_owner() { return ::geteuid() == 0 ? 60000 : ::geteuid(); }

inline img::store_options test_store_options(const std::filesystem::path& state) {
  img::store_options o;
  o.state_root = state;
  o.owner_uid = test_owner();
  o.owner_gid = ::geteuid() == 0 ? 60000 : ::getegid();
  o.durable = false;  // scratch stores: no syncfs per layer
  return o;
}

// The image tests' own images (tests/images/make-images): built once, cached.
std::filesystem::path made_image(const std::string& name);

}  // namespace evalbox::testing::image
