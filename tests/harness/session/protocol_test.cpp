// The grammar of evalbox.session.v1 (docs/sessions.md, "The protocol"): every op with its fields
// and defaults, the ids a request may carry, the hostile lines a client may send (wrong types,
// out-of-range numbers, bad base64, NUL bytes, oversized bytes) refused with the right kind, and
// the lines a server sends back: one JSON line each, whatever bytes they carry.
#include "harness/session/protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "base/base64.h"
#include "base/json.h"

namespace evalbox::harness {
namespace {

using namespace std::string_literals;

// A line that must parse as a request.
request parsed(std::string_view line) {
  auto r = parse_request(line);
  EXPECT_TRUE(r) << line << ": " << r.error().kind << ": " << r.error().message;
  return r ? *r : request{};
}

// A request of `op` with `members` (JSON object members, without braces) that must parse.
request req(std::string_view op, std::string_view members = "") {
  return parsed(members.empty() ? fmt::format(R"({{"op": "{}"}})", op)
                                : fmt::format(R"({{"op": "{}", {}}})", op, members));
}

// The error of a parsed request's fields, with `what` naming the case in a failure.
template <class T>
protocol_error refused(const std::expected<T, protocol_error>& e, std::string_view what) {
  EXPECT_FALSE(e) << what << " was accepted";
  return e ? protocol_error{} : e.error();
}

// One line that parses as JSON: exactly one '\n', at its end.
json one_line(const std::string& line) {
  EXPECT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n') << line;
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "more than one line: " << line;
  auto j = parse_json(line, "reply");
  EXPECT_TRUE(j) << line;
  return j ? *j : json();
}

const protocol_limits limits;

// ---- parse_request: the line, its id and its op -------------------------------------------------

TEST(SessionRequestLine, EveryOpIsKnownByItsName) {
  const char* names[] = {"ping",       "info", "exec",     "input", "resize", "cancel", "read_file",
                         "write_file", "ls",   "snapshot", "reset", "fork",   "grade",  "stop"};
  for (const char* name : names) {
    auto r = parse_request(fmt::format(R"({{"id": 1, "op": "{}"}})", name));
    ASSERT_TRUE(r) << name << ": " << r.error().message;
    EXPECT_EQ(to_string(r->op), name);
    EXPECT_EQ(r->body.at("op"), name);
  }
}

TEST(SessionRequestLine, AStringIdIsEchoed) {
  json id;
  auto r = parse_request(R"({"id": "req-7", "op": "ping"})", &id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, "req-7");
  EXPECT_EQ(id, "req-7");
}

TEST(SessionRequestLine, AnIntegerIdIsEchoedWhateverItsSign) {
  for (const char* text : {"42", "-7", "0", "18446744073709551615", "-9223372036854775808"}) {
    json id;
    auto r = parse_request(fmt::format(R"({{"id": {}, "op": "ping"}})", text), &id);
    ASSERT_TRUE(r) << text;
    EXPECT_EQ(r->id.dump(), text);
    EXPECT_EQ(id.dump(), text);
  }
}

TEST(SessionRequestLine, ALineWithoutAnIdHasANullOne) {
  auto r = parse_request(R"({"op": "ping"})");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->id.is_null());
}

TEST(SessionRequestLine, AFloatObjectArrayOrBooleanIdIsRefused) {
  for (const char* text : {"1.5", "1e3", "{}", R"({"a": 1})", "[]", "[1]", "true"}) {
    json id;
    auto r = parse_request(fmt::format(R"({{"id": {}, "op": "ping"}})", text), &id);
    ASSERT_FALSE(r) << text << " was taken as an id";
    EXPECT_EQ(r.error().kind, "invalid_request") << text;
    EXPECT_TRUE(id.is_null()) << "an unusable id is not echoed: " << text;
  }
}

TEST(SessionRequestLine, AnUnknownOpIsUnknownOpAndKeepsTheId) {
  json id;
  auto r = parse_request(R"({"id": 9, "op": "launch_missiles"})", &id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, "unknown_op");
  EXPECT_NE(r.error().message.find("launch_missiles"), std::string::npos) << r.error().message;
  EXPECT_EQ(id, 9);
}

TEST(SessionRequestLine, OpNamesAreCaseSensitive) {
  auto r = parse_request(R"({"op": "PING"})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, "unknown_op");
}

TEST(SessionRequestLine, AnUnknownOpIsQuotedAtMost64Bytes) {
  const std::string name(100000, 'x');
  auto r = parse_request(fmt::format(R"({{"op": "{}"}})", name));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, "unknown_op");
  EXPECT_NE(r.error().message.find(std::string(64, 'x')), std::string::npos);
  EXPECT_EQ(r.error().message.find(std::string(65, 'x')), std::string::npos);
}

TEST(SessionRequestLine, AMalformedLineIsAnInvalidRequestWithANullId) {
  for (const char* line : {"", "not json", "[]", R"("ping")", "42", "null", "{}", R"({"op": 5})",
                           R"({"op": null})", R"({"op": ["ping"]})", R"({"op": "ping"} {})",
                           R"({"op": "ping")", "{\"op\": \"pi\xffng\"}"}) {
    json id;
    auto r = parse_request(line, &id);
    ASSERT_FALSE(r) << line;
    EXPECT_EQ(r.error().kind, "invalid_request") << line;
    EXPECT_TRUE(id.is_null()) << line;
  }
}

TEST(SessionRequestLine, ANumberPastADoubleIsNotJson) {
  auto r = parse_request(R"({"op": "exec", "argv": ["true"], "timeout": 1e400})");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, "invalid_request");
}

TEST(SessionRequestLine, DeepNestingIsRefusedNotRecursedInto) {
  const std::string deep =
      R"({"op": "ping", "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto r = parse_request(deep);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, "invalid_request");
}

// ---- exec ---------------------------------------------------------------------------------------

TEST(SessionExecOp, DefaultsAreTheDocumentedOnes) {
  auto p = exec_of(req("exec", R"("argv": ["pytest", "-q"])"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->argv, (std::vector<std::string>{"pytest", "-q"}));
  EXPECT_EQ(p->cwd, "");
  EXPECT_TRUE(p->env.empty());
  EXPECT_EQ(p->stdin_data, std::nullopt);
  EXPECT_FALSE(p->stdin_open);
  EXPECT_EQ(p->timeout_ms, std::nullopt);
  EXPECT_FALSE(p->tty);
  EXPECT_EQ(p->rows, 0);
  EXPECT_EQ(p->cols, 0);
  EXPECT_EQ(p->max_output, 16ull << 20);
  EXPECT_EQ(p->max_output, limits.max_output_bytes);
  EXPECT_TRUE(p->stream);
}

TEST(SessionExecOp, EveryFieldIsRead) {
  auto p = exec_of(parsed(R"({"id": 1, "op": "exec", "argv": ["sh", "-c", "cat"],
      "cwd": "/tmp", "env": {"A": "1", "B": ""}, "stdin": "aGVsbG8=", "stdin_open": true,
      "timeout": 2.5, "tty": true, "rows": 40, "cols": 120, "max_output": 1024,
      "stream": true})"),
                   limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->argv, (std::vector<std::string>{"sh", "-c", "cat"}));
  EXPECT_EQ(p->cwd, "/tmp");
  EXPECT_EQ(p->env, (std::map<std::string, std::string>{{"A", "1"}, {"B", ""}}));
  EXPECT_EQ(p->stdin_data, "hello");
  EXPECT_TRUE(p->stdin_open);
  EXPECT_EQ(p->timeout_ms, 2500u);
  EXPECT_TRUE(p->tty);
  EXPECT_EQ(p->rows, 40);
  EXPECT_EQ(p->cols, 120);
  EXPECT_EQ(p->max_output, 1024u);
  EXPECT_TRUE(p->stream);
}

TEST(SessionExecOp, NullFieldsTakeTheirDefaults) {
  auto p = exec_of(req("exec", R"("argv": ["true"], "cwd": null, "env": null,
      "stdin": null, "timeout": null, "tty": null, "max_output": null, "stream": null)"),
                   limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->stdin_data, std::nullopt);
  EXPECT_EQ(p->timeout_ms, std::nullopt);
  EXPECT_EQ(p->max_output, limits.max_output_bytes);
  EXPECT_TRUE(p->stream);
}

TEST(SessionExecOp, ATimeoutIsRoundedUpToAMillisecond) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"0.0001", 1}, {"1.5", 1500}, {"2", 2000}, {"604800", 604800000}};
  for (auto [text, ms] : cases) {
    auto p = exec_of(req("exec", fmt::format(R"("argv": ["true"], "timeout": {})", text)), limits);
    ASSERT_TRUE(p) << text << ": " << p.error().message;
    EXPECT_EQ(p->timeout_ms, ms) << text;
  }
}

TEST(SessionExecOp, ATimeoutOfZeroNegativeOrPastAWeekIsRefused) {
  for (const char* text :
       {"0", "-0.0", "-1", "-1e308", "604800.5", "1e12", "1.7e308", "\"5\"", "true", "[1]"}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["true"], "timeout": {})", text)), limits),
        text);
    EXPECT_EQ(e.kind, "invalid_request") << text;
    EXPECT_NE(e.message.find("timeout"), std::string::npos) << text << ": " << e.message;
  }
}

TEST(SessionExecOp, ArgvIsARequiredNonEmptyListOfStrings) {
  for (const char* argv :
       {"", R"("argv": null)", R"("argv": [])", R"("argv": [""])", R"("argv": "ls -l")",
        R"("argv": ["ls", 1])", R"("argv": {})", R"("argv": [["ls"]])", R"("argv": [null])"}) {
    auto e = refused(exec_of(req("exec", argv), limits), argv);
    EXPECT_EQ(e.kind, "invalid_request") << argv;
    EXPECT_NE(e.message.find("argv"), std::string::npos) << argv << ": " << e.message;
  }
}

TEST(SessionExecOp, ALaterEmptyArgumentIsKept) {
  auto p = exec_of(req("exec", R"("argv": ["printf", ""])"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->argv, (std::vector<std::string>{"printf", ""}));
}

TEST(SessionExecOp, ANulByteInAnArgumentIsRefused) {
  for (const char* argv : {R"(["a\u0000b"])", R"(["\u0000"])", R"(["ls", "x\u0000"])"}) {
    auto e = refused(exec_of(req("exec", fmt::format(R"("argv": {})", argv)), limits), argv);
    EXPECT_EQ(e.kind, "invalid_request") << argv;
  }
}

TEST(SessionExecOp, EnvIsAnObjectOfStrings) {
  for (const char* env : {R"({"A": 1})", R"({"A": null})", R"({"A": true})", R"({"A": ["x"]})",
                          R"({"A": {"B": "c"}})", R"(["A=1"])", R"("A=1")", "5"}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["env"], "env": {})", env)), limits), env);
    EXPECT_EQ(e.kind, "invalid_request") << env;
    EXPECT_NE(e.message.find("env"), std::string::npos) << env << ": " << e.message;
  }
}

TEST(SessionExecOp, AnEnvNameWithEqualsOrNulOrNoCharacterIsRefused) {
  for (const char* env : {R"({"A=B": "c"})", R"({"=": "c"})", R"({"": "c"})",
                          R"({"A\u0000B": "c"})", R"({"A": "x\u0000y"})"}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["env"], "env": {})", env)), limits), env);
    EXPECT_EQ(e.kind, "invalid_request") << env;
  }
}

TEST(SessionExecOp, AnEnvValueMayHoldEquals) {
  auto p = exec_of(req("exec", R"("argv": ["env"], "env": {"A": "b=c"})"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->env.at("A"), "b=c");
}

TEST(SessionExecOp, RowsAndColsAreAtMost4096) {
  auto p =
      exec_of(req("exec", R"("argv": ["sh"], "tty": true, "rows": 4096, "cols": 4096)"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->rows, 4096);
  for (const char* field :
       {R"("rows": 5000)", R"("cols": 4097)", R"("rows": -1)", R"("cols": 65536)",
        R"("rows": 4294967296)", R"("rows": 24.5)", R"("cols": "80")"}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["sh"], "tty": true, {})", field)), limits),
        field);
    EXPECT_EQ(e.kind, "invalid_request") << field;
  }
}

TEST(SessionExecOp, MaxOutputIsBetweenOneByteAndTheCap) {
  auto at_cap = exec_of(
      req("exec", fmt::format(R"("argv": ["yes"], "max_output": {})", limits.max_output_cap)),
      limits);
  ASSERT_TRUE(at_cap) << at_cap.error().message;
  EXPECT_EQ(at_cap->max_output, limits.max_output_cap);
  for (std::string value :
       {"0"s, std::to_string(limits.max_output_cap + 1), "-1"s, "18446744073709551616"s, "1.0"s}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["yes"], "max_output": {})", value)), limits),
        value);
    EXPECT_EQ(e.kind, "invalid_request") << value;
  }
}

TEST(SessionExecOp, ATerminalThatIsNotStreamedIsRefused) {
  auto e = refused(exec_of(req("exec", R"("argv": ["sh"], "tty": true,
                                     "stream": false)"),
                           limits),
                   "tty without stream");
  EXPECT_EQ(e.kind, "invalid_request");
  auto p = exec_of(req("exec", R"("argv": ["sh"], "stream": false)"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_FALSE(p->stream);
}

TEST(SessionExecOp, BooleansAreNotNumbersOrStrings) {
  for (const char* field : {R"("tty": 1)", R"("stream": "false")", R"("stdin_open": 0)",
                            R"("stream": null, "tty": "yes")"}) {
    auto e =
        refused(exec_of(req("exec", fmt::format(R"("argv": ["sh"], {})", field)), limits), field);
    EXPECT_EQ(e.kind, "invalid_request") << field;
  }
}

TEST(SessionExecOp, AnUnknownFieldIsNamed) {
  auto e = refused(exec_of(req("exec", R"("argv": ["ls"], "argz": ["ls"])"), limits), "argz");
  EXPECT_EQ(e.kind, "invalid_request");
  EXPECT_NE(e.message.find("'argz'"), std::string::npos) << e.message;
}

TEST(SessionExecOp, EmptyStdinIsGivenAndEmpty) {
  auto p = exec_of(req("exec", R"("argv": ["cat"], "stdin": "")"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->stdin_data, "");
}

TEST(SessionExecOp, StdinThatIsNotCanonicalPaddedBase64IsRefused) {
  for (const char* text : {"aGVsbG8", "aGVsbG8==", "aGVs bG8=", "aGVsbG8*", "QR==", "QUI=x",
                           "QUJ=", "Q===", "====", "=QUJD", "QU=J", "aGVsbG8=\n", "YQ"}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["cat"], "stdin": {})", json(text).dump())),
                limits),
        text);
    EXPECT_EQ(e.kind, "invalid_request") << text;
    EXPECT_NE(e.message.find("stdin"), std::string::npos) << text << ": " << e.message;
  }
}

TEST(SessionExecOp, StdinPastMaxFileBytesIsTooLarge) {
  protocol_limits small;
  small.max_file_bytes = 8;
  auto fits = exec_of(
      req("exec", fmt::format(R"("argv": ["cat"], "stdin": "{}")", base64_encode("12345678"))),
      small);
  ASSERT_TRUE(fits) << fits.error().message;
  EXPECT_EQ(fits->stdin_data, "12345678");
  for (const std::string& bytes : {"123456789"s, std::string(4096, 'x')}) {
    auto e = refused(
        exec_of(req("exec", fmt::format(R"("argv": ["cat"], "stdin": "{}")", base64_encode(bytes))),
                small),
        "oversized stdin");
    EXPECT_EQ(e.kind, "too_large") << bytes.size();
  }
}

// ---- read_file, write_file, ls ------------------------------------------------------------------

TEST(SessionReadFileOp, MaxBytesDefaultsToTheFileLimit) {
  auto p = read_of(req("read_file", R"("path": "/workspace/a.txt")"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->path, "/workspace/a.txt");
  EXPECT_EQ(p->max_bytes, 32ull << 20);
}

TEST(SessionReadFileOp, MaxBytesIsKeptBelowTheLimitAndCutToIt) {
  auto small = read_of(req("read_file", R"("path": "a", "max_bytes": 100)"), limits);
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_EQ(small->max_bytes, 100u);
  auto big = read_of(req("read_file", R"("path": "a",
                                "max_bytes": 18446744073709551615)"),
                     limits);
  ASSERT_TRUE(big) << big.error().message;
  EXPECT_EQ(big->max_bytes, limits.max_file_bytes);
}

TEST(SessionReadFileOp, PathIsARequiredNonEmptyString) {
  for (const char* fields :
       {"", R"("path": "")", R"("path": null)", R"("path": 7)", R"("path": ["a"])"}) {
    auto e = refused(read_of(req("read_file", fields), limits), fields);
    EXPECT_EQ(e.kind, "invalid_request") << fields;
    EXPECT_NE(e.message.find("path"), std::string::npos) << fields << ": " << e.message;
  }
}

TEST(SessionReadFileOp, ANegativeOrFractionalMaxBytesIsRefused) {
  for (const char* value : {"-1", "1.5", "\"10\""}) {
    auto e = refused(
        read_of(req("read_file", fmt::format(R"("path": "a", "max_bytes": {})", value)), limits),
        value);
    EXPECT_EQ(e.kind, "invalid_request") << value;
  }
}

TEST(SessionReadFileOp, AnUnknownFieldIsNamed) {
  auto e = refused(read_of(req("read_file", R"("path": "a", "offset": 3)"), limits), "offset");
  EXPECT_EQ(e.kind, "invalid_request");
  EXPECT_NE(e.message.find("'offset'"), std::string::npos) << e.message;
}

TEST(SessionWriteFileOp, DefaultsAreTheDocumentedOnes) {
  auto p = write_of(req("write_file", R"("path": "notes.txt", "data": "aGk=")"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->path, "notes.txt");
  EXPECT_EQ(p->data, "hi");
  EXPECT_EQ(p->mode, 0644u);
  EXPECT_FALSE(p->append);
  EXPECT_FALSE(p->parents);
}

TEST(SessionWriteFileOp, EveryFieldIsRead) {
  auto p = write_of(req("write_file", R"("path": "/a/b", "data": "",
                              "mode": 4095, "append": true, "parents": true)"),
                    limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->data, "");
  EXPECT_EQ(p->mode, 07777u);
  EXPECT_TRUE(p->append);
  EXPECT_TRUE(p->parents);
}

TEST(SessionWriteFileOp, DataIsRequired) {
  for (const char* fields : {R"("path": "a")", R"("path": "a", "data": null)",
                             R"("path": "a", "data": 5)", R"("path": "a", "data": ["aGk="])"}) {
    auto e = refused(write_of(req("write_file", fields), limits), fields);
    EXPECT_EQ(e.kind, "invalid_request") << fields;
    EXPECT_NE(e.message.find("data"), std::string::npos) << fields << ": " << e.message;
  }
}

TEST(SessionWriteFileOp, ModeIsPermissionBitsOnly) {
  for (const char* mode : {"8191", "4096", "-1", "4294967296", "420.0", "\"0644\""}) {
    auto e = refused(
        write_of(req("write_file", fmt::format(R"("path": "a", "data": "", "mode": {})", mode)),
                 limits),
        mode);
    EXPECT_EQ(e.kind, "invalid_request") << mode;
  }
}

TEST(SessionWriteFileOp, DataThatIsNotCanonicalPaddedBase64IsRefused) {
  for (const char* text : {"aGk", "aGl=", "aG=k", "aGk=aGk=", "!!!!", "aGk=="}) {
    auto e = refused(
        write_of(req("write_file", fmt::format(R"("path": "a", "data": {})", json(text).dump())),
                 limits),
        text);
    EXPECT_EQ(e.kind, "invalid_request") << text;
  }
}

TEST(SessionWriteFileOp, DataPastMaxFileBytesIsTooLarge) {
  protocol_limits small;
  small.max_file_bytes = 5;
  auto fits = write_of(
      req("write_file", fmt::format(R"("path": "a", "data": "{}")", base64_encode("12345"))),
      small);
  ASSERT_TRUE(fits) << fits.error().message;
  auto e = refused(write_of(req("write_file", fmt::format(R"("path": "a", "data": "{}")",
                                                          base64_encode("123456"))),
                            small),
                   "six bytes");
  EXPECT_EQ(e.kind, "too_large");
}

TEST(SessionWriteFileOp, OversizedTextIsTooLargeBeforeItIsDecoded) {
  protocol_limits small;
  small.max_file_bytes = 5;
  // Not base64 at all, but far past the limit: its size alone refuses it.
  auto e = refused(write_of(req("write_file", fmt::format(R"("path": "a", "data": "{}")",
                                                          std::string(4096, '!'))),
                            small),
                   "oversized garbage");
  EXPECT_EQ(e.kind, "too_large");
}

TEST(SessionLsOp, PathIsRequired) {
  auto p = path_of(req("ls", R"("path": "/workspace")"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, "/workspace");
  for (const char* fields : {"", R"("path": "")", R"("path": 1)", R"("path": "a", "all": true)"}) {
    auto e = refused(path_of(req("ls", fields)), fields);
    EXPECT_EQ(e.kind, "invalid_request") << fields;
  }
}

// ---- input, resize ------------------------------------------------------------------------------

TEST(SessionInputOp, DefaultsToNoDataAndNoEof) {
  auto p = input_of(req("input"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->data, "");
  EXPECT_FALSE(p->eof);
}

TEST(SessionInputOp, DataIsDecodedAndEofRead) {
  auto p = input_of(parsed(R"({"id": "i", "op": "input", "data": "bHMK", "eof": true})"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->data, "ls\n");
  EXPECT_TRUE(p->eof);
}

TEST(SessionInputOp, BadDataOrFieldsAreRefused) {
  for (const char* fields :
       {R"("data": "bHM")", R"("data": 1)", R"("eof": "yes")", R"("data": "", "rows": 3)"}) {
    auto e = refused(input_of(req("input", fmt::format(R"({})", fields))), fields);
    EXPECT_EQ(e.kind, "invalid_request") << fields;
  }
}

TEST(SessionResizeOp, RowsAndColsAreBothRequired) {
  auto p = resize_of(req("resize", R"("rows": 50, "cols": 200)"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->rows, 50);
  EXPECT_EQ(p->cols, 200);
  for (const char* fields :
       {R"("rows": 50)", R"("cols": 50)", R"("rows": 0, "cols": 80)", R"("rows": 5000, "cols": 80)",
        R"("rows": 24, "cols": -80)", R"("rows": 24, "cols": 80, "x": 1)"}) {
    auto e = refused(resize_of(req("resize", fmt::format(R"({})", fields))), fields);
    EXPECT_EQ(e.kind, "invalid_request") << fields;
  }
}

// ---- snapshot, reset, fork ----------------------------------------------------------------------

TEST(SessionSnapshotName, TheAllowedCharactersUpTo64AreValid) {
  for (const std::string& name :
       {"clean"s, "a"s, "A-Z_a.z-0.9"s, "..."s, ".hidden"s, "-x"s, std::string(64, 'n')})
    EXPECT_TRUE(valid_snapshot_name(name)) << name;
}

TEST(SessionSnapshotName, DotsPathsLongAndOtherCharactersAreInvalid) {
  for (const std::string& name :
       {""s, "."s, ".."s, std::string(65, 'n'), "a/b"s, "/"s, "../x"s, "a b"s, "a\0b"s,
        "caf\xc3\xa9"s, "a\nb"s, "a:b"s, "a\\b"s, "\xff"s})
    EXPECT_FALSE(valid_snapshot_name(name))
        << json(name).dump(-1, ' ', true, json::error_handler_t::replace);
}

TEST(SessionSnapshotOp, NameIsRequiredAndChecked) {
  auto p = snapshot_of(req("snapshot", R"("name": "clean")"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, "clean");
  for (const char* fields : {"", R"("name": "")", R"("name": ".")", R"("name": "..")",
                             R"("name": "a/b")", R"("name": 1)", R"("name": "a", "to": "b")"}) {
    auto e = refused(snapshot_of(req("snapshot", fields)), fields);
    EXPECT_EQ(e.kind, "invalid_request") << fields;
  }
}

TEST(SessionResetOp, WithoutToItIsTheSessionsStart) {
  auto p = reset_of(req("reset"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(*p, std::nullopt);
  auto to = reset_of(req("reset", R"("to": "clean")"));
  ASSERT_TRUE(to) << to.error().message;
  EXPECT_EQ(*to, "clean");
}

TEST(SessionResetOp, ToMustBeASnapshotName) {
  for (const char* to : {R"("")", R"("..")", R"("../../etc")", R"("a/b")", "5", "[]"}) {
    auto e = refused(reset_of(req("reset", fmt::format(R"("to": {})", to))), to);
    EXPECT_EQ(e.kind, "invalid_request") << to;
  }
}

TEST(SessionForkOp, DefaultsToOneForkOfNow) {
  auto p = fork_of(req("fork"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->from, std::nullopt);
  EXPECT_EQ(p->count, 1);
}

TEST(SessionForkOp, FromAndCountAreRead) {
  auto p = fork_of(req("fork", R"("from": "clean", "count": 256)"), limits);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->from, "clean");
  EXPECT_EQ(p->count, 256);
}

TEST(SessionForkOp, CountIsBetweenOneAndMaxFork) {
  for (const char* count : {"0", "257", "300", "-1", "1.5", "4294967297", "\"2\""}) {
    auto e = refused(fork_of(req("fork", fmt::format(R"("count": {})", count)), limits), count);
    EXPECT_EQ(e.kind, "invalid_request") << count;
  }
}

TEST(SessionForkOp, FromMustBeASnapshotName) {
  for (const char* from : {R"("")", R"("..")", R"("x/y")", "1"}) {
    auto e = refused(fork_of(req("fork", fmt::format(R"("from": {})", from)), limits), from);
    EXPECT_EQ(e.kind, "invalid_request") << from;
  }
}

// ---- ops without fields -------------------------------------------------------------------------

TEST(SessionBareOps, TakeNoField) {
  for (const char* op : {"ping", "info", "cancel", "grade", "stop"}) {
    auto ok = no_fields(parsed(fmt::format(R"({{"id": "x", "op": "{}"}})", op)));
    EXPECT_TRUE(ok) << op << ": " << ok.error().message;
    auto e = refused(no_fields(parsed(fmt::format(R"({{"op": "{}", "force": true}})", op))), op);
    EXPECT_EQ(e.kind, "invalid_request") << op;
    EXPECT_NE(e.message.find("'force'"), std::string::npos) << op << ": " << e.message;
  }
}

// ---- the lines a server sends -------------------------------------------------------------------

TEST(SessionReplyLines, AnOkLineIsOneJsonLineWithItsIdAndFields) {
  const json j = one_line(ok_line(7, {{"size", 3}}));
  EXPECT_EQ(j, json::parse(R"({"id": 7, "ok": true, "size": 3})")) << j.dump();
  EXPECT_EQ(one_line(ok_line("req")), json::parse(R"({"id": "req", "ok": true})"));
  EXPECT_EQ(one_line(ok_line(json())), json::parse(R"({"id": null, "ok": true})"));
}

TEST(SessionReplyLines, AnOkLinesIdAndOkCannotBeOverriddenByItsFields) {
  const json j = one_line(ok_line(7, {{"id", "other"}, {"ok", false}}));
  EXPECT_EQ(j.at("id"), 7);
  EXPECT_EQ(j.at("ok"), true);
}

TEST(SessionReplyLines, AnErrorLineIsOneJsonLineWithKindAndMessage) {
  const json j = one_line(error_line("r1", "not_found", "/workspace/x: no such file"));
  EXPECT_EQ(j, json::parse(R"({"id": "r1", "ok": false,
                               "error": {"kind": "not_found",
                                         "message": "/workspace/x: no such file"}})"))
      << j.dump();
  EXPECT_TRUE(one_line(error_line(json(), "invalid_request", "x")).at("id").is_null());
}

TEST(SessionReplyLines, AnEvalboxErrorIsSentWithItsProtocolKind) {
  const json j = one_line(error_line(3, error{error_kind::busy, "too many execs", 0}));
  EXPECT_EQ(j.at("error").at("kind"), "busy");
  EXPECT_EQ(j.at("error").at("message"), "too many execs");
}

TEST(SessionReplyLines, InvalidUtf8InAMessageStillMakesOneValidLine) {
  const std::string message = "bad name \xff\xfe\xc3 here";
  const json j = one_line(error_line(1, "internal", message));
  const std::string got = j.at("error").at("message");
  EXPECT_TRUE(got.starts_with("bad name ")) << got;
  EXPECT_TRUE(got.ends_with(" here")) << got;
  EXPECT_NE(got.find("\xef\xbf\xbd"), std::string::npos) << "U+FFFD replaces the bad bytes";
}

TEST(SessionReplyLines, InvalidUtf8InAnOkLinesFieldsStillMakesOneValidLine) {
  // ls reports names as the filesystem has them, which need not be UTF-8.
  const json j = one_line(ok_line(1, {{"entries", {{{"name", "\xff\xfe.txt"}}}}}));
  EXPECT_TRUE(j.at("entries").at(0).at("name").get<std::string>().ends_with(".txt"));
}

TEST(SessionReplyLines, NewlinesAndControlBytesInAMessageStayOnTheLine) {
  const std::string message = "line one\nline two\r\n\0\x1b[31m"s;
  const json j = one_line(error_line("x", "internal", message));
  EXPECT_EQ(j.at("error").at("message"), message);
}

TEST(SessionReplyLines, AFrameCarriesEveryByteThroughBase64) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
  const json j = one_line(frame_line("exec-1", "stdout", bytes));
  EXPECT_EQ(j.at("id"), "exec-1");
  EXPECT_EQ(j.at("stream"), "stdout");
  EXPECT_EQ(j.size(), 3u) << j.dump();
  auto decoded = base64_decode(j.at("data").get<std::string>());
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, bytes);
}

TEST(SessionReplyLines, AnEmptyFrameIsEmptyBase64) {
  const json j = one_line(frame_line(4, "stderr", ""));
  EXPECT_EQ(j, json::parse(R"({"id": 4, "stream": "stderr", "data": ""})")) << j.dump();
}

TEST(SessionReplyLines, AnIdReadFromARequestIsEchoedUnchanged) {
  for (const char* text : {R"("ünï-ćødé ✓")", R"("a\"b\\c\n")", "18446744073709551615", "-3"}) {
    auto r = parse_request(fmt::format(R"({{"id": {}, "op": "ping"}})", text));
    ASSERT_TRUE(r) << text;
    EXPECT_EQ(one_line(ok_line(r->id)).at("id"), r->id) << text;
    EXPECT_EQ(one_line(error_line(r->id, "internal", "m")).at("id"), r->id) << text;
    EXPECT_EQ(one_line(frame_line(r->id, "stdout", "x")).at("id"), r->id) << text;
  }
}

// ---- greeting and error kinds -------------------------------------------------------------------

TEST(SessionGreeting, NamesTheProtocolTheSessionAndTheDocumentedLimits) {
  const json g = greeting("ses-3f9a1c2b7d4e", limits);
  EXPECT_EQ(g, json::parse(R"({"protocol": "evalbox.session.v1", "session": "ses-3f9a1c2b7d4e",
      "limits": {"max_message_bytes": 67108864, "max_file_bytes": 33554432,
                 "max_output_bytes": 16777216, "max_execs": 256}})"))
      << g.dump();
}

TEST(SessionGreeting, SendsTheServersOwnLimits) {
  protocol_limits l;
  l.max_message_bytes = 1;
  l.max_file_bytes = 2;
  l.max_output_bytes = 3;
  l.max_execs = 4;
  const json g = greeting("s", l);
  EXPECT_EQ(g.at("limits"), json::parse(R"({"max_message_bytes": 1, "max_file_bytes": 2,
                                             "max_output_bytes": 3, "max_execs": 4})"));
}

TEST(SessionErrorKinds, EachEvalboxKindHasItsProtocolKind) {
  EXPECT_EQ(protocol_kind(error_kind::invalid_argument), "invalid_request");
  EXPECT_EQ(protocol_kind(error_kind::not_found), "not_found");
  EXPECT_EQ(protocol_kind(error_kind::permission), "permission");
  EXPECT_EQ(protocol_kind(error_kind::busy), "busy");
  EXPECT_EQ(protocol_kind(error_kind::unsupported), "unsupported");
  EXPECT_EQ(protocol_kind(error_kind::cancelled), "ended");
  EXPECT_EQ(protocol_kind(error_kind::expired), "ended");
  EXPECT_EQ(protocol_kind(error_kind::io), "internal");
  EXPECT_EQ(protocol_kind(error_kind::internal), "internal");
}

}  // namespace
}  // namespace evalbox::harness
