// The command-line reference of docs/cli.md, generated from the CLI11 definitions themselves
// (`evalbox --cli-reference`), so that the page cannot drift from the binary: scripts/check-docs
// fails when the two differ, and `scripts/check-docs --fix` rewrites the page's generated part.
//
// The output is canonical: commands in the order they are registered, options in the order
// they are added, nothing that depends on the host, the environment or the time.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "harness/cli/commands.h"

namespace evalbox::harness::cli {

namespace {

bool hidden(const CLI::Option* o) { return o->get_group().empty(); }
bool hidden(const CLI::App* a) { return a->get_group().empty(); }

// Markdown-escapes text that is meant as plain prose: nothing in a description may turn into
// emphasis, HTML, a code span or a table cell boundary.
std::string escape(std::string_view text) {
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '\\':
      case '`':
      case '*':
      case '|':
        out += '\\';
        out += c;
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '_': {
        // Inside a word (EVALBOX_STATE_DIR) an underscore is never emphasis; at its edges it
        // may be.
        const bool inside = i > 0 && i + 1 < text.size() && word(text[i - 1]) && word(text[i + 1]);
        if (!inside) out += '\\';
        out += c;
        break;
      }
      default:
        out += c;
    }
  }
  return out;
}

// A description as Markdown: hard-wrapped lines of one paragraph are joined, and lines
// indented by two spaces (the examples and tables of the help text) become a code block.
std::string render_description(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  std::string out, paragraph;
  std::vector<std::string_view> code;
  auto flush = [&] {
    if (!paragraph.empty()) out += escape(paragraph) + "\n\n";
    paragraph.clear();
    if (!code.empty()) {
      out += "```text\n";
      for (auto l : code) out += std::string(l) + "\n";
      out += "```\n\n";
    }
    code.clear();
  };
  for (auto line : lines) {
    if (line.starts_with("  ")) {
      if (!paragraph.empty()) flush();
      code.push_back(line.substr(2));
    } else if (line.find_first_not_of(' ') == std::string_view::npos) {
      flush();
    } else {
      if (!code.empty()) flush();
      paragraph += (paragraph.empty() ? "" : " ") + std::string(line);
    }
  }
  flush();
  return out;
}

// CLI11 stores "unlimited" as a very large count.
constexpr int unbounded = 1 << 20;

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

// A positional as the usage line shows it: NAME, [NAME], NAME..., NAME [NAME].
std::string usage_of(const CLI::Option* p) {
  const std::string name = upper(p->get_name(true));
  const int lo = p->get_items_expected_min(), hi = p->get_items_expected_max();
  std::string out;
  if (hi >= unbounded) {
    out = name + "...";
    return p->get_required() && lo > 0 ? out : "[" + out + "]";
  }
  for (int i = 0; i < std::max(hi, 1); ++i) {
    const bool optional = !p->get_required() || i >= std::max(lo, 1);
    out += (i ? " " : "") + (optional ? "[" + name + "]" : name);
  }
  return out;
}

// The value an option takes, as CLI11 names it (TEXT, INT, UINT, FLOAT, and the validator's
// description: TEXT:DIR, TEXT:{md,html}), or "flag".
bool is_flag(const CLI::Option* o) { return o->get_items_expected_max() == 0; }

std::string value_of(const CLI::Option* o) {
  if (is_flag(o)) return "flag";
  std::string t = o->get_type_name();
  if (o->get_items_expected_max() > 1 && o->nonpositional()) t += ", repeatable";
  return t;
}

// A code span in a table cell: only a pipe needs escaping there (GFM), anything else would show.
std::string code(std::string_view text) {
  std::string out = "`";
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out + "`";
}

std::string names_of(const CLI::Option* o) {
  std::string out;
  for (const auto& s : o->get_snames()) out += fmt::format("{}`-{}`", out.empty() ? "" : ", ", s);
  for (const auto& l : o->get_lnames()) out += fmt::format("{}`--{}`", out.empty() ? "" : ", ", l);
  return out;
}

void describe(const CLI::App& app, const std::string& path, std::string& out) {
  const auto* help = app.get_help_ptr();
  const auto options = app.get_options(
      [&](const CLI::Option* o) { return o != help && !hidden(o) && o->nonpositional(); });
  const auto positionals = app.get_options([&](const CLI::Option* o) {
    return !hidden(o) && !o->nonpositional() && o->get_positional();
  });
  const auto commands = app.get_subcommands([](const CLI::App* a) { return !hidden(a); });

  out += fmt::format("### `{}`\n\n", path);
  if (!app.get_description().empty()) out += render_description(app.get_description());

  std::string usage = path;
  if (!options.empty()) usage += " [OPTIONS]";
  for (const auto* p : positionals) usage += " " + usage_of(p);
  if (!commands.empty()) usage += app.get_require_subcommand_min() > 0 ? " COMMAND" : " [COMMAND]";
  out += fmt::format("Usage: `{}`\n\n", usage);

  if (!options.empty() || !positionals.empty()) {
    out += "| argument | value | default | description |\n|---|---|---|---|\n";
    auto row = [&](const std::string& name, const CLI::Option* o) {
      std::string text = escape(o->get_description());
      if (o->get_required()) text = "**required**" + (text.empty() ? "" : "; " + text);
      if (!o->get_envname().empty()) text += fmt::format(" (environment: `{}`)", o->get_envname());
      std::string def = o->get_default_str();
      if (def.empty() && is_flag(o)) def = "off";
      out += fmt::format("| {} | {} | {} | {} |\n", name, code(value_of(o)),
                         def.empty() ? "" : code(def), text);
    };
    for (const auto* p : positionals) row(fmt::format("`{}`", upper(p->get_name(true))), p);
    for (const auto* o : options) row(names_of(o), o);
    out += "\n";
  }
  if (!commands.empty()) {
    std::string list;
    for (const auto* c : commands)
      list += fmt::format("{}`{} {}`", list.empty() ? "" : ", ", path, c->get_name());
    out += fmt::format("Commands: {}.\n\n", list);
  }
  // Subcommands inherit the footer: say it once, where it is set.
  const auto* parent = app.get_parent();
  if (!app.get_footer().empty() && (!parent || parent->get_footer() != app.get_footer()))
    out += render_description(app.get_footer());
  for (const auto* c : commands) describe(*c, path + " " + c->get_name(), out);
}

}  // namespace

std::string cli_reference(const CLI::App& app) {
  std::string out;
  describe(app, app.get_name(), out);
  // One trailing newline, whatever the last section ended with.
  while (out.ends_with("\n\n")) out.pop_back();
  return out;
}

}  // namespace evalbox::harness::cli
