// The name `evalbox::json` without nlohmann-json's full header, for headers that only pass
// JSON values by reference or return them from declared functions: json.h costs every
// translation unit that includes it about a second. Include json.h where a value is built,
// read or held.
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace evalbox {
inline namespace base {

using json = nlohmann::json;  // the same alias as json.h's

}  // namespace base
}  // namespace evalbox
