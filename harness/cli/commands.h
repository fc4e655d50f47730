// The evalbox command line: each command registers itself on the CLI11 app from its own file
// (cmd_*.cpp). main.cpp reads like a table of contents of them.
#pragma once

#include <functional>
#include <string>

#include "harness/runner/exit_status.h"

// CLI11's name, declared to keep its header out of this one.
namespace CLI {  // NOLINT(readability-identifier-naming)
class App;
}  // namespace CLI

namespace evalbox::harness::cli {

// Exit codes shared by every command (harness/runner/exit_status.h).
using harness::exit_code;
using enum harness::exit_code;

// A command's action, run after parsing; returns the process exit code.
using action = std::function<int()>;

// Each register_* adds a subcommand and stores its action into `out` when it is selected.
void register_doctor(CLI::App& app, action& out);
void register_gc(CLI::App& app, action& out);
void register_sandbox(CLI::App& app, action& out);
void register_validate(CLI::App& app, action& out);
void register_fixture(CLI::App& app, action& out);
void register_run(CLI::App& app, action& out);
void register_regrade(CLI::App& app, action& out);
void register_report(CLI::App& app, action& out);
void register_compare(CLI::App& app, action& out);
void register_merge(CLI::App& app, action& out);
void register_slurm(CLI::App& app, action& out);
void register_k8s(CLI::App& app, action& out);
void register_image(CLI::App& app, action& out);
void register_bundle(CLI::App& app, action& out);
void register_cache(CLI::App& app, action& out);
void register_import(CLI::App& app, action& out);
void register_runs(CLI::App& app, action& out);
void register_session(CLI::App& app, action& out);
void register_serve(CLI::App& app, action& out);

// The reference part of docs/cli.md: every visible command, option and positional of `app`
// with its value type, default, environment binding and description, as canonical Markdown.
// `evalbox --cli-reference` prints it; scripts/check-docs compares it with the page.
std::string cli_reference(const CLI::App& app);

}  // namespace evalbox::harness::cli
