// Fuzzes the Codex CLI parsers with what an agent controls: the `codex exec --json` stream
// and its rollout session file. Input: the stream, then optionally a NUL byte and the rollout.
#include "adapters/codex/transcript.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view input = fuzz::as_text(data, size);
  size_t nul = input.find('\0');
  std::string_view stream = input.substr(0, nul);
  std::string_view rollout = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  auto t = adapters::codex::parse_codex_exec_json(stream);
  fuzz::check(t.has_value(), "parse_codex_exec_json never fails on content");
  size_t before = t->steps.size();
  int added = adapters::codex::add_unreported_commands(*t, rollout);
  fuzz::check(added >= 0 && t->steps.size() == before + static_cast<size_t>(added),
              "add_unreported_commands adds exactly the steps it reports");
  fuzz::check_transcript(*t);
  for (const auto& s : t->steps)
    for (const auto& c : s.tool_calls)
      if (c.command) (void)adapters::codex::unwrap_shell_command(*c.command);
  return 0;
}
