// adapter: oracle — runs the fixture's reference solution (solution/solve.sh) inside the
// sandbox as the agent. With it, `evalbox fixture test` proves the fixture can be solved.
#pragma once

#include <memory>

#include "harness/agent/adapter.h"

namespace evalbox::adapters::oracle {
std::unique_ptr<harness::adapter> make_adapter();
}
