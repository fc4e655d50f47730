// Fuzzes the suite file loader (harness/config, then harness/fixture for the fixture entries,
// as load_suite does). A suite names fixture directories, globs and home files relative to
// itself, so it is parsed against a scratch directory holding one fixture (fx/one) and one
// home file (home.toml), with HOME pointing there too.
#include <cstdlib>
#include <string>
#include <vector>

#include "base/fs.h"
#include "harness/config/parse.h"
#include "harness/fixture/resolve.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// Keeps the target hermetic and fast: glob(3) over an absolute path, `~` or `..` would walk
// the host's file system (`/*/*/*/*` reaches every /proc/<pid>/task), so an input that has a
// glob character together with one of those is skipped. Plain paths are only stat(2)ed.
bool escapes_scratch(std::string_view text) {
  if (text.find_first_of("*?[") == std::string_view::npos) return false;
  if (text.find("..") != std::string_view::npos || text.find('~') != std::string_view::npos ||
      text.find('\\') != std::string_view::npos)
    return true;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '/') continue;
    char before = i == 0 ? ' ' : text[i - 1];
    bool in_word = (before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
                   (before >= '0' && before <= '9') || before == '_' || before == '-' ||
                   before == '.' || before == '*' || before == '?' || before == ']';
    if (!in_word) return true;  // a path that starts with '/'
  }
  return false;
}

const std::filesystem::path& suite_dir() {
  static const std::filesystem::path dir = [] {
    auto d = evalbox::fuzz::scratch_dir() / "suite";
    evalbox::fuzz::check(evalbox::make_dirs(d / "fx" / "one" / "workspace").has_value(), "mkdir");
    evalbox::fuzz::check(
        evalbox::write_file(d / "fx" / "one" / "fixture.yaml", "schema: evalbox.fixture.v1\n")
            .has_value(),
        "write fixture.yaml");
    evalbox::fuzz::check(evalbox::write_file(d / "home.toml", "x = 1\n").has_value(), "write");
    ::setenv("HOME", d.c_str(), 1);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  std::string_view text = fuzz::as_text(data, size);
  if (escapes_scratch(text)) return -1;  // -1: libFuzzer keeps it out of the corpus
  std::vector<harness::config_error> errors;
  // The names evalbox registers (harness/cli/registry.cpp), which the composition root passes.
  static const std::vector<std::string> adapters = {"claude-code", "codex", "command",
                                                    "gemini",      "noop",  "oracle"};
  auto spec = harness::parse_suite_yaml(text, "suite.yaml", suite_dir(), adapters, errors);
  spec.fixture_dirs = harness::resolve_fixture_dirs(spec.fixture_entries, suite_dir(), errors);
  for (const auto& e : errors) {
    fuzz::check(!e.what.empty(), "every problem says what it is");
    fuzz::check(e.where.file == "suite.yaml", "every problem names the file");
  }
  if (errors.empty()) {
    for (const auto& f : spec.fixture_dirs)
      fuzz::check(f.is_absolute(), "fixture directories resolve to absolute paths");
  }
  (void)harness::peek_schema(text);
  return 0;
}
