// The image store as the command line opens it (cmd_image.cpp): under the state root of
// default_preparer_options() (or --state-dir), owned by the sandbox id, with the layer limits
// from the environment. Shared by `evalbox image` and `evalbox doctor`.
#pragma once

#include <string>

#include "base/error.h"
#include "sandbox/image/store.h"

namespace evalbox::harness::cli {

result<sandbox::image::store> open_image_store(const std::string& state_dir);

}  // namespace evalbox::harness::cli
