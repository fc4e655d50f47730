// Parsing fixture.yaml and suite.yaml text into specs: what valid input becomes, and that bad
// input is reported at the right place with every problem collected.
#include "harness/config/parse.h"

#include <gtest/gtest.h>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

fixture_spec parse_ok(std::string_view text) {
  std::vector<config_error> errors;
  auto spec = parse_fixture_yaml(text, "fixture.yaml", errors);
  EXPECT_TRUE(errors.empty()) << join_messages(errors);
  return spec;
}

std::vector<config_error> fixture_errors(std::string_view text) {
  std::vector<config_error> errors;
  parse_fixture_yaml(text, "fixture.yaml", errors);
  return errors;
}

constexpr std::string_view minimal_fixture = R"y(schema: evalbox.fixture.v1
id: tiny
prompt: do it
checks:
  - {id: a, shell: "true"}
)y";

TEST(fixture_parse, minimal_fixture_gets_defaults) {
  auto spec = parse_ok(minimal_fixture);
  EXPECT_EQ(spec.id, "tiny");
  EXPECT_EQ(spec.prompt, "do it");
  EXPECT_FALSE(spec.follow_up);
  EXPECT_EQ(spec.threshold, 1.0);
  EXPECT_EQ(spec.network.mode, network_spec::mode_kind::none);
  ASSERT_EQ(spec.checks.size(), 1u);
  EXPECT_EQ(spec.checks[0].kind, check_kind::shell);
  EXPECT_EQ(spec.checks[0].shell, "true");
  EXPECT_EQ(spec.checks[0].weight, 1.0);
  EXPECT_EQ(spec.checks[0].where.line, 5);
  EXPECT_EQ(spec.checks[0].where.column, 5);
}

TEST(fixture_parse, every_field_and_check_kind) {
  auto spec = parse_ok(R"y(schema: evalbox.fixture.v1
id: full.one_2
description: all of it
prompt: |
  Fix it.
follow_up: And test it.
setup: ["git init -q", "git add -A"]
limits: {wall: 10m, cpu: 90s, memory: 2GiB, pids: 512, disk: 1GiB, output: 8MiB}
network: {allow: ["api.example.com:443", "[::1]:8080", "*.example.org:80"]}
threshold: 0.75
checks:
  - {id: s, shell: "python3 /grader/t.py", weight: 2}
  - {id: f1, file: {path: out.txt, equals: "42\n"}}
  - {id: f2, file: {path: a/b.txt, exists: true}}
  - {id: f3, file: {path: gone.txt, absent: true}}
  - {id: f4, file: {path: log.txt, contains: done}}
  - {id: f5, file: {path: log.txt, matches: "^ok [0-9]+$"}}
  - {id: f6, file: {path: c.json, json: {pointer: /a/0, equals: {x: 1, y: "2", z: [true, null]}}}}
  - {id: g, git: {paths: [tests/, setup.py], state: unchanged}}
  - {id: t1, transcript: {command_matches: "pytest"}}
  - {id: t2, transcript: {final_message_matches: "(?:done|fixed)"}}
  - {id: t3, transcript: {tool_used: shell}}
  - {id: t4, transcript: {forbid_command: "rm -rf"}}
  - {id: t5, transcript: {max_steps: 40}}
)y");
  EXPECT_EQ(spec.id, "full.one_2");
  EXPECT_EQ(spec.description, "all of it");
  EXPECT_EQ(spec.prompt, "Fix it.\n");
  EXPECT_EQ(spec.follow_up, "And test it.");
  EXPECT_EQ(spec.setup, (std::vector<std::string>{"git init -q", "git add -A"}));
  EXPECT_EQ(spec.limits.wall_ms, 600000u);
  EXPECT_EQ(spec.limits.cpu_ms, 90000u);
  EXPECT_EQ(spec.limits.memory_bytes, 2ull << 30);
  EXPECT_EQ(spec.limits.pids, 512u);
  EXPECT_EQ(spec.limits.disk_bytes, 1ull << 30);
  EXPECT_EQ(spec.limits.output_bytes, 8ull << 20);
  EXPECT_EQ(spec.network.mode, network_spec::mode_kind::allow);
  EXPECT_EQ(spec.network.allow.size(), 3u);
  EXPECT_EQ(spec.threshold, 0.75);
  ASSERT_EQ(spec.checks.size(), 13u);
  EXPECT_EQ(spec.checks[0].weight, 2.0);
  using fk = file_check::predicate_kind;
  EXPECT_EQ(spec.checks[1].file.predicate, fk::equals);
  EXPECT_EQ(spec.checks[1].file.text, "42\n");
  EXPECT_EQ(spec.checks[2].file.predicate, fk::exists);
  EXPECT_EQ(spec.checks[3].file.predicate, fk::absent);
  EXPECT_EQ(spec.checks[4].file.predicate, fk::contains);
  EXPECT_EQ(spec.checks[5].file.predicate, fk::matches);
  EXPECT_EQ(spec.checks[6].file.predicate, fk::json);
  EXPECT_EQ(spec.checks[6].file.pointer, "/a/0");
  EXPECT_EQ(spec.checks[6].file.expected,
            (json{{"x", 1}, {"y", "2"}, {"z", json::array({true, nullptr})}}));
  EXPECT_EQ(spec.checks[7].kind, check_kind::git);
  EXPECT_EQ(spec.checks[7].git.paths, (std::vector<std::string>{"tests/", "setup.py"}));
  EXPECT_EQ(spec.checks[7].git.state, git_check::state_kind::unchanged);
  using tk = transcript_check::predicate_kind;
  EXPECT_EQ(spec.checks[8].transcript.predicate, tk::command_matches);
  EXPECT_EQ(spec.checks[8].transcript.regex.source(), "pytest");
  EXPECT_TRUE(spec.checks[8].transcript.regex.compiled()) << "compiled once, when loaded";
  EXPECT_EQ(spec.checks[9].transcript.predicate, tk::final_message_matches);
  EXPECT_EQ(spec.checks[10].transcript.predicate, tk::tool_used);
  EXPECT_EQ(spec.checks[11].transcript.predicate, tk::forbid_command);
  EXPECT_EQ(spec.checks[12].transcript.predicate, tk::max_steps);
  EXPECT_EQ(spec.checks[12].transcript.max_steps, 40u);
}

TEST(fixture_parse, workspace_from_git_and_a_tests_check) {
  auto spec = parse_ok(R"y(schema: evalbox.fixture.v1
id: swe
prompt: fix it
workspace: {git: ../repos/calc, commit: 3f2a9c1e0b7d4a6f8e2c1b0a9d8e7f6a5b4c3d2e}
checks:
  - id: tests
    weight: 2
    tests:
      patch: grader/sub/test.patch
      command: python3 -m pytest -rA
      report: {junit: out/report.xml}
      fail_to_pass: ["t.py::test_a[x y]"]
      pass_to_pass: []
)y");
  ASSERT_TRUE(spec.git_workspace);
  EXPECT_EQ(spec.git_workspace->source, "../repos/calc");
  EXPECT_EQ(spec.git_workspace->commit, "3f2a9c1e0b7d4a6f8e2c1b0a9d8e7f6a5b4c3d2e");
  EXPECT_EQ(spec.git_workspace->commit_where.line, 4);
  ASSERT_EQ(spec.checks.size(), 1u);
  const auto& t = spec.checks[0].tests;
  EXPECT_EQ(spec.checks[0].kind, check_kind::tests);
  EXPECT_EQ(t.patch, "sub/test.patch");  // relative to grader/, mounted at /grader
  EXPECT_EQ(t.command, "python3 -m pytest -rA");
  EXPECT_EQ(t.report, tests_check::report_kind::junit);
  EXPECT_EQ(t.junit_path, "out/report.xml");
  EXPECT_EQ(t.fail_to_pass, std::vector<std::string>{"t.py::test_a[x y]"});
  EXPECT_TRUE(t.pass_to_pass.empty());
  EXPECT_EQ(spec.checks[0].to_json()["tests"]["report"]["junit"], "out/report.xml");
}

TEST(fixture_parse, bad_git_workspaces_and_tests_checks_are_reported_where_they_are) {
  auto errors = fixture_errors(R"y(schema: evalbox.fixture.v1
id: swe
prompt: fix it
workspace: {git: ../repos/calc, commit: main}
checks:
  - id: a
    tests: {patch: ../test.patch, command: pytest, report: xml, fail_to_pass: [x]}
  - id: b
    tests: {command: pytest}
  - id: c
    tests: {patch: grader/t.patch, fail_to_pass: [x]}
)y");
  std::string all = join_messages(errors);
  EXPECT_NE(all.find("fixture.yaml:4:41: workspace.commit 'main' is not a commit id"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checks.a.tests.patch '../test.patch' must be a file under grader/"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checks.a.tests.report must be `pytest`, `{format: NAME}` or `{junit: PATH}`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checks.b.tests names no test"), std::string::npos) << all;
  EXPECT_NE(all.find("checks.c.tests is missing 'command'"), std::string::npos) << all;
  EXPECT_EQ(errors.size(), 5u) << all;
}

TEST(fixture_parse, a_tests_check_reads_its_output_with_the_log_format_it_names) {
  std::vector<config_error> errors;
  auto spec = parse_fixture_yaml(R"y(schema: evalbox.fixture.v1
id: swe
prompt: fix it
checks:
  - id: tests
    tests: {command: ./tests/runtests.py, report: {format: django}, fail_to_pass: [x]}
)y",
                                 "fixture.yaml", errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  EXPECT_EQ(spec.checks[0].tests.report, tests_check::report_kind::pytest);
  EXPECT_EQ(spec.checks[0].tests.log_format, "django");
  EXPECT_EQ(spec.checks[0].to_json()["tests"]["report"]["format"], "django");
  auto bad = fixture_errors(R"y(schema: evalbox.fixture.v1
id: swe
prompt: fix it
checks:
  - id: a
    tests: {command: x, report: {format: nose}, fail_to_pass: [x]}
  - id: b
    tests: {command: x, report: {format: django, junit: r.xml}, fail_to_pass: [x]}
)y");
  std::string all = join_messages(bad);
  EXPECT_NE(all.find("fixture.yaml:6:42: checks.a.tests.report.format 'nose' is no log format "
                     "(hint: one of pytest, pytest-v2, pytest-options, matplotlib, seaborn, "
                     "django, sympy)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("checks.b.tests.report takes one of `junit` and `format`"), std::string::npos)
      << all;
  EXPECT_EQ(bad.size(), 2u) << all;
}

TEST(fixture_parse, unknown_key_points_at_the_key_with_a_suggestion) {
  auto errors = fixture_errors(std::string(minimal_fixture) + "treshold: 0.5\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message(),
            "fixture.yaml:6:1: unknown key 'treshold' in the fixture (hint: did you mean "
            "'threshold'?)");
}

TEST(fixture_parse, every_problem_is_reported_not_just_the_first) {
  auto errors = fixture_errors(R"y(schema: evalbox.fixture.v2
id: Bad_Id
prompt: [not, text]
checks:
  - {id: a, shell: x, file: {path: y, exists: true}}
  - {id: a, git: {paths: [../up], state: maybe}}
)y");
  EXPECT_EQ(errors.size(), 7u) << join_messages(errors);
}

TEST(fixture_parse, missing_required_fields_are_named) {
  auto errors = fixture_errors("schema: evalbox.fixture.v1\n");
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].what.find("'id'"), std::string::npos);
  EXPECT_NE(errors[1].what.find("'prompt'"), std::string::npos);
  EXPECT_NE(errors[2].what.find("'checks'"), std::string::npos);
}

TEST(fixture_parse, invalid_regex_is_rejected_at_parse_time) {
  auto errors = fixture_errors(R"y(schema: evalbox.fixture.v1
id: r
prompt: p
checks:
  - {id: t, transcript: {command_matches: "(unclosed"}}
)y");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.line, 5);
  EXPECT_NE(errors[0].what.find("not a valid regular expression"), std::string::npos);
}

// RE2's refusal points at the character it stopped at when the pattern is written verbatim
// (plain or quoted without escapes), else at the scalar, saying where in the pattern.
TEST(fixture_parse, a_pattern_error_points_at_the_offending_character) {
  auto errors = fixture_errors(R"y(schema: evalbox.fixture.v1
id: r
prompt: p
checks:
  - {id: f, file: {path: big.txt, matches: "x{1001}"}}
  - {id: b, transcript: {forbid_command: (\w+) \1}}
  - id: m
    transcript:
      final_message_matches: "ok \\1"
)y");
  ASSERT_EQ(errors.size(), 3u) << join_messages(errors);
  EXPECT_EQ(errors[0].message(),
            "fixture.yaml:5:46: checks.f.file.matches is not a valid regular expression: invalid "
            "repetition size: {1001} (hint: the syntax is RE2's "
            "(https://github.com/google/re2/wiki/Syntax); escape special characters like ( [ . * "
            "with \\)");
  EXPECT_EQ(errors[1].message(),
            "fixture.yaml:6:48: checks.b.transcript.forbid_command is not a valid regular "
            "expression: invalid escape sequence: \\1 (hint: RE2 has no backreferences; match "
            "the text itself, or use a shell check)");
  EXPECT_EQ(errors[2].where.line, 9);
  EXPECT_NE(errors[2].what.find("(at character 4 of the pattern)"), std::string::npos)
      << errors[2].what;
}

TEST(fixture_parse, yaml_syntax_error_has_a_location) {
  auto errors = fixture_errors("schema: evalbox.fixture.v1\nid: [unclosed\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_GT(errors[0].where.line, 0);
  EXPECT_NE(errors[0].what.find("YAML syntax error"), std::string::npos);
}

TEST(fixture_parse, duplicate_key_is_an_error) {
  auto errors = fixture_errors(std::string(minimal_fixture) + "id: again\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].what.find("'id' twice"), std::string::npos);
}

TEST(fixture_parse, network_port_out_of_range_is_rejected) {
  auto errors = fixture_errors(std::string(minimal_fixture) + "network: {allow: [\"h:70000\"]}\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].what.find("1..65535"), std::string::npos);
}

TEST(fixture_parse, quoted_json_equals_stays_a_string) {
  auto spec = parse_ok(R"y(schema: evalbox.fixture.v1
id: j
prompt: p
checks:
  - {id: a, file: {path: c.json, json: {pointer: /n, equals: "3"}}}
  - {id: b, file: {path: c.json, json: {pointer: /n, equals: 3}}}
)y");
  EXPECT_EQ(spec.checks[0].file.expected, json("3"));
  EXPECT_EQ(spec.checks[1].file.expected, json(3));
}

class suite_parse : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto name : {"a", "b", "c"}) {
      ASSERT_TRUE(make_dirs(dir_.path() / "fx" / name / "workspace"));
      ASSERT_TRUE(write_file(dir_.path() / "fx" / name / "fixture.yaml", "schema: x\n"));
    }
    ASSERT_TRUE(make_dirs(dir_.path() / "fx" / "not-a-fixture"));
    ASSERT_TRUE(write_file(dir_.path() / "home-config.toml", "x = 1\n"));
  }
  suite_spec parse(std::string_view text, std::vector<config_error>& errors) {
    return parse_suite_yaml(text, "suite.yaml", dir_.path(), adapters_, errors);
  }
  // The names the composition root would pass (its registry's).
  std::vector<std::string> adapters_ = {"claude-code", "codex", "command", "gemini",
                                        "loop",        "noop",  "oracle"};
  temp_dir dir_{"evalbox-suite-parse"};
};

TEST_F(suite_parse, keeps_fixture_entries_and_reads_settings_and_defaults) {
  std::vector<config_error> errors;
  auto spec = parse(R"y(schema: evalbox.suite.v1
name: demo
fixtures: ["fx/*", fx/a]
credentials: {codex-login: ~/.codex/auth.json}
candidates:
  - id: agent
    adapter: command
    argv: [sh, -c, "echo {prompt}"]
    transcript: jsonl
    home_files: {.config/x.toml: home-config.toml}
    env: {FOO: bar}
    credential: codex-login
  - {id: none, adapter: noop, network: {allow: ["api.x.com:443"]}}
trials: 3
concurrency: 2
limits: {wall: 5m}
baseline: none
prices: {gpt-x: {input_per_mtok: 1.25, output_per_mtok: 10}}
)y",
                    errors);
  ASSERT_TRUE(errors.empty()) << join_messages(errors);
  // As written, with where: harness/fixture resolves them (resolve_test.cpp).
  ASSERT_EQ(spec.fixture_entries.size(), 2u);
  EXPECT_EQ(spec.fixture_entries[0].pattern, "fx/*");
  EXPECT_EQ(spec.fixture_entries[0].where.to_string(), "suite.yaml:3:12");
  EXPECT_EQ(spec.fixture_entries[1].pattern, "fx/a");
  EXPECT_EQ(spec.fixture_entries[1].where.to_string(), "suite.yaml:3:20");
  EXPECT_TRUE(spec.fixture_dirs.empty());
  EXPECT_EQ(spec.trials, 3);
  EXPECT_EQ(spec.concurrency, 2);
  EXPECT_EQ(spec.default_limits.wall_ms, 300000u);
  EXPECT_EQ(spec.baseline, "none");
  EXPECT_EQ(spec.results_dir, fs::path("results/demo"));
  ASSERT_EQ(spec.candidates.size(), 2u);
  const auto& agent = spec.candidates[0];
  EXPECT_EQ(agent.adapter, "command");
  ASSERT_NE(agent.find("argv"), nullptr);
  EXPECT_EQ(agent.find("argv")->value, (json{"sh", "-c", "echo {prompt}"}));
  EXPECT_EQ(agent.find("argv")->where.line, 8);
  EXPECT_EQ(agent.find("argv")->where.column, 11);
  EXPECT_EQ(agent.find("transcript")->value, json("jsonl"));
  EXPECT_EQ(agent.find("env"), nullptr);  // a common key, not a setting
  EXPECT_EQ(agent.home_files.at(".config/x.toml"), dir_.path() / "home-config.toml");
  EXPECT_EQ(agent.env.at("FOO"), "bar");
  EXPECT_EQ(agent.credentials, std::vector<std::string>{"codex-login"});
  EXPECT_FALSE(spec.credentials.at("codex-login").string().starts_with("~"));
  ASSERT_TRUE(spec.candidates[1].network);
  EXPECT_EQ(spec.candidates[1].network->allow, std::vector<std::string>{"api.x.com:443"});
  EXPECT_EQ(spec.prices.at("gpt-x").output_per_mtok, 10.0);
}

TEST_F(suite_parse, unknown_adapter_lists_the_known_ones) {
  std::vector<config_error> errors;
  parse(
      "schema: evalbox.suite.v1\nname: s\nfixtures: [fx/a]\ncandidates:\n"
      "  - {id: x, adapter: gemini-cli}\n",
      errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message(),
            "suite.yaml:5:22: candidates.x names unknown adapter 'gemini-cli' (hint: known "
            "adapters: claude-code, codex, command, gemini, loop, noop, oracle)");
}

TEST_F(suite_parse, adapter_names_are_only_the_ones_given) {
  const std::string text =
      "schema: evalbox.suite.v1\nname: s\nfixtures: [fx/a]\ncandidates:\n"
      "  - {id: x, adapter: mine}\n";
  std::vector<config_error> errors;
  parse(text, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.to_string(), "suite.yaml:5:22");
  adapters_ = {"mine"};
  errors.clear();
  parse(text, errors);
  EXPECT_TRUE(errors.empty()) << join_messages(errors);
  // No names given: no adapter is known, not every one.
  adapters_.clear();
  parse(text, errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message(),
            "suite.yaml:5:22: candidates.x names unknown adapter 'mine' (hint: no adapter is "
            "registered)");
}

TEST_F(suite_parse, undefined_credential_and_duplicate_ids_are_errors) {
  std::vector<config_error> errors;
  parse(
      "schema: evalbox.suite.v1\nname: s\nfixtures: [fx/a]\ncandidates:\n"
      "  - {id: x, adapter: codex, credential: login}\n"
      "  - {id: x, adapter: noop}\nbaseline: y\n",
      errors);
  ASSERT_EQ(errors.size(), 3u) << join_messages(errors);
  EXPECT_NE(errors[0].what.find("credential 'login'"), std::string::npos);
  EXPECT_NE(errors[1].what.find("used twice"), std::string::npos);
  EXPECT_NE(errors[2].what.find("baseline 'y'"), std::string::npos);
}

TEST_F(suite_parse, missing_home_file_source_is_an_error) {
  std::vector<config_error> errors;
  parse(
      "schema: evalbox.suite.v1\nname: s\nfixtures: [fx/a]\ncandidates:\n"
      "  - {id: x, adapter: noop, home_files: {a.txt: missing.txt}}\n",
      errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].what.find("does not exist"), std::string::npos);
}

TEST(peek_schema, reads_the_schema_key) {
  EXPECT_EQ(peek_schema("schema: evalbox.suite.v1\nname: x\n"), "evalbox.suite.v1");
  EXPECT_EQ(peek_schema("[1, 2]"), "");
  EXPECT_EQ(peek_schema("a: [unclosed"), "");
}

}  // namespace
}  // namespace evalbox::harness
