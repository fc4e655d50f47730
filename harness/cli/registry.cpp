// Every adapter evalbox ships, registered by name.
#include "harness/cli/registry.h"

#include "adapters/claude-code/claude_code.h"
#include "adapters/codex/codex.h"
#include "adapters/command/command.h"
#include "adapters/gemini/gemini.h"
#include "adapters/noop/noop.h"
#include "adapters/oracle/oracle.h"

namespace evalbox::cli {

harness::adapter_registry make_registry() {
  harness::adapter_registry r;
  r.add(adapters::make_noop_adapter());
  r.add(adapters::make_oracle_adapter());
  r.add(adapters::make_command_adapter());
  r.add(adapters::make_codex_adapter());
  r.add(adapters::make_claude_code_adapter());
  r.add(adapters::make_gemini_adapter());
  return r;
}

}  // namespace evalbox::cli
