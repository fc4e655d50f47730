// Every adapter evalbox ships, registered by name.
#include "harness/cli/registry.h"

#include "adapters/claude-code/claude_code.h"
#include "adapters/codex/codex.h"
#include "adapters/command/command.h"
#include "adapters/gemini/gemini.h"
#include "adapters/loop/loop.h"
#include "adapters/noop/noop.h"
#include "adapters/oracle/oracle.h"

namespace evalbox::harness::cli {

harness::adapter_registry make_registry() {
  harness::adapter_registry r;
  r.add(adapters::noop::make_adapter());
  r.add(adapters::oracle::make_adapter());
  r.add(adapters::command::make_adapter());
  r.add(adapters::loop::make_adapter());
  r.add(adapters::codex::make_adapter());
  r.add(adapters::claude_code::make_adapter());
  r.add(adapters::gemini::make_adapter());
  return r;
}

}  // namespace evalbox::harness::cli
