// Harbor tasks' images, resolved before anything runs (docs/harbor.md, "Images"): a task names
// its environment as a registry reference (`[environment] docker_image`) or a Dockerfile, and
// evalbox reads images from files, never from a registry. Here, in the composition root,
// because it may start podman or buildah — the programs that hold and build images.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "harness/config/spec.h"
#include "harness/fixture/harbor.h"
#include "sandbox/base/error.h"

namespace evalbox::cli {

// Gives every Harbor task of `fixtures` an environment.image_ref, trying in order:
//   1. `images` (the command line's --image over the suite's images:) for its docker_image;
//   2. a local podman store holding docker_image: saved once (podman image save, as an
//      oci-archive) under <state>/harbor/podman/<image id>.tar;
//   3. environment/Dockerfile, built with `podman build` (else `buildah bud`) and saved once,
//      cached by the tree digest of environment/ under <state>/harbor/build/<digest>.tar.
// A task none of these resolves is a config_error naming the commands that would; a build that
// fails is one naming its log. `say` gets a line before each save or build (they take time).
// podman and buildah use their own configuration (CONTAINERS_STORAGE_CONF, CONTAINERS_CONF).
std::vector<harness::config_error> resolve_harbor_images(
    std::vector<harness::fixture_spec>& fixtures, const harness::image_map& images,
    const std::filesystem::path& state_root, const std::function<void(const std::string&)>& say);

// The suite's images: with the command line's --image REF=SOURCE options over them (relative
// sources against the current directory); a malformed option is an invalid_argument error.
result<harness::image_map> image_options(const harness::suite_spec& suite,
                                         const std::vector<std::string>& options);

// For a command: the images of `options` (--image) over the suite's, then every Harbor task of
// `suite` resolved; problems printed to stderr. Returns exit_ok, or exit_usage when an image
// cannot be had (the message says how to get it).
int resolve_suite_images(harness::suite_spec& suite, const std::vector<std::string>& options);

}  // namespace evalbox::cli
