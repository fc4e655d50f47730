// When a registry image (docker://) is pulled: the policy `--pull` names, shared by the image
// store and the preparer's facade (a light header: no JSON, no HTTP).
#pragma once

#include <string_view>

#include "base/error.h"

namespace evalbox::sandbox::image {

// `missing` uses the image the store already has under that reference (no network: a tag
// resolves in microseconds) and pulls otherwise; `always` asks the registry what the reference
// names now (layers already in the store are not downloaded again); `never` uses the store
// only and fails naming the reference.
enum class pull_policy { missing, always, never };
result<pull_policy> parse_pull_policy(std::string_view text);
std::string_view to_string(pull_policy p) noexcept;

}  // namespace evalbox::sandbox::image
