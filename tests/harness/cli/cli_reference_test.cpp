// The reference docs/cli.md embeds: what a user reads there must be what the definitions say
// (every visible command, option and default), nothing hidden, and Markdown that renders as
// the help text reads.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/cli/commands.h"

namespace evalbox::harness::cli {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A small app shaped like evalbox's: a top-level table, a command with a required positional,
// defaults captured or not, a flag, an environment binding, nested and hidden commands.
struct sample {
  CLI::App app{"tool: does things.\n\n  tool go FILE     go somewhere\n", "tool"};
  std::string file, mode = "fast", plain;
  std::vector<std::string> many;
  int level = 3;
  bool dry = false;

  sample() {
    app.require_subcommand(1);
    app.set_version_flag("--version", "tool 1");
    auto* go = app.add_subcommand("go",
                                  "Go somewhere.\nWrapped line of the same paragraph.\n\n"
                                  "Examples:\n  tool go a.txt\n  tool go b.txt -j 2");
    go->add_option("file", file, "the FILE to read")->required();
    go->add_option("--mode", mode, "how: fast | slow, e.g. <fast>")->capture_default_str();
    go->add_option("--level,-l", level, "level *of* detail")->envname("TOOL_LEVEL");
    go->add_option("--plain", plain, "no default here");
    go->add_option("--many", many, "repeatable");
    go->add_flag("--dry-run", dry, "only say what would happen");
    go->add_option("--secret", plain, "not for users")->group("");
    auto* sub = app.add_subcommand("sub", "Nested commands.");
    sub->require_subcommand(1);
    sub->add_subcommand("inner", "The inner one.");
    app.add_subcommand("hidden", "Not listed.")->group("");
  }
};

TEST(cli_reference, lists_every_visible_command_with_its_usage_in_definition_order) {
  sample s;
  const auto ref = cli_reference(s.app);
  const auto top = ref.find("### `tool`\n"), go = ref.find("### `tool go`\n"),
             sub = ref.find("### `tool sub`\n"), inner = ref.find("### `tool sub inner`\n");
  ASSERT_NE(top, std::string::npos) << ref;
  ASSERT_NE(go, std::string::npos) << ref;
  ASSERT_NE(sub, std::string::npos) << ref;
  ASSERT_NE(inner, std::string::npos) << ref;
  EXPECT_LT(top, go);
  EXPECT_LT(go, sub);
  EXPECT_LT(sub, inner);
  EXPECT_TRUE(has(ref, "Usage: `tool [OPTIONS] COMMAND`")) << ref;
  EXPECT_TRUE(has(ref, "Usage: `tool go [OPTIONS] FILE`")) << ref;
  EXPECT_TRUE(has(ref, "Usage: `tool sub COMMAND`")) << ref;
  EXPECT_TRUE(has(ref, "Commands: `tool go`, `tool sub`.")) << ref;
}

TEST(cli_reference, gives_each_option_its_value_default_and_environment_variable) {
  sample s;
  const auto ref = cli_reference(s.app);
  EXPECT_TRUE(has(ref, "| `FILE` | `TEXT` |  | **required**; the FILE to read |")) << ref;
  EXPECT_TRUE(has(ref, "| `--mode` | `TEXT` | `fast` |")) << ref;
  EXPECT_TRUE(has(ref,
                  "| `-l`, `--level` | `INT` |  | level \\*of\\* detail (environment: "
                  "`TOOL_LEVEL`) |"))
      << ref;
  EXPECT_TRUE(has(ref, "| `--plain` | `TEXT` |  | no default here |")) << ref;
  EXPECT_TRUE(has(ref, "| `--many` | `TEXT, repeatable` |")) << ref;
  EXPECT_TRUE(has(ref, "| `--dry-run` | `flag` | `off` | only say what would happen |")) << ref;
  EXPECT_TRUE(has(ref, "| `--version` | `flag` | `off` |")) << ref;
}

TEST(cli_reference, leaves_out_hidden_options_and_commands_and_the_help_flag) {
  sample s;
  const auto ref = cli_reference(s.app);
  EXPECT_FALSE(has(ref, "--secret")) << ref;
  EXPECT_FALSE(has(ref, "hidden")) << ref;
  EXPECT_FALSE(has(ref, "--help")) << ref;
}

TEST(cli_reference, escapes_markdown_and_keeps_examples_as_code) {
  sample s;
  const auto ref = cli_reference(s.app);
  // A pipe would end the table cell, <fast> would be an HTML tag, *of* emphasis.
  EXPECT_TRUE(has(ref, "how: fast \\| slow, e.g. &lt;fast&gt;")) << ref;
  EXPECT_TRUE(has(ref,
                  "Go somewhere. Wrapped line of the same paragraph.\n\nExamples:\n\n"
                  "```text\ntool go a.txt\ntool go b.txt -j 2\n```\n"))
      << ref;
  EXPECT_TRUE(has(ref, "tool: does things.\n\n```text\ntool go FILE     go somewhere\n```\n"))
      << ref;
}

TEST(cli_reference, is_the_same_text_every_time) {
  sample a, b;
  EXPECT_EQ(cli_reference(a.app), cli_reference(b.app));
  EXPECT_TRUE(cli_reference(a.app).ends_with("\n"));
  EXPECT_FALSE(cli_reference(a.app).ends_with("\n\n"));
}

}  // namespace
}  // namespace evalbox::harness::cli
