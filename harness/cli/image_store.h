// The image store as the command line opens it (cmd_image.cpp): under the state root of
// default_preparer_options() (or --state-dir), owned by the sandbox id, with the layer limits
// from the environment. Shared by `evalbox image`, `evalbox doctor` and the commands that run
// suites (their registry settings).
#pragma once

#include <memory>
#include <string>

#include "base/error.h"
#include "sandbox/image/registry.h"
#include "sandbox/image/store.h"

namespace evalbox::harness::cli {

result<sandbox::image::store> open_image_store(const std::string& state_dir);

// How this command pulls: the host's registry settings (registry_settings_from_host) with the
// credential helpers of the auth files (`docker-credential-NAME get`) started on the host.
result<std::shared_ptr<sandbox::image::registry_settings>> cli_registry_settings();

}  // namespace evalbox::harness::cli
