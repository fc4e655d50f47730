// adapter: noop — an agent that does nothing. With it, `evalbox fixture test` proves that the
// untouched workspace fails at least one check.
#pragma once

#include <memory>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::noop {
std::unique_ptr<harness::adapter> make_adapter();
}
