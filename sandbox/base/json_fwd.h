// The name of evalbox's JSON value without nlohmann's full header, which costs every
// translation unit that includes it: for headers that only pass `const json&` or declare
// functions that return one. Code that builds, reads or holds values includes
// sandbox/base/json.h.
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace evalbox {

using json = nlohmann::json;  // objects are std::map: keys are always sorted

}  // namespace evalbox
