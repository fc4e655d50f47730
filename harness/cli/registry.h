// The composition root's list of adapters: the only place that names concrete adapters.
#pragma once

#include "harness/agent/adapter.h"

namespace evalbox::harness::cli {
harness::adapter_registry make_registry();
}
