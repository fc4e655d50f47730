// The results directory (see results.h).
#include "harness/results/results.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cstring>
#include <map>
#include <utility>

#include "base/fs.h"
#include "base/json_checks.h"
#include "harness/results/fast_json.h"

namespace evalbox::harness {
inline namespace results {

namespace fs = std::filesystem;

struct record_fields::node {
  std::map<std::string, node, std::less<>> keys;  // an object's fields, by key
  std::unique_ptr<node> elements;                 // every element of an array
};

record_fields::record_fields(std::initializer_list<std::string_view> paths)
    : root_(std::make_unique<node>()) {
  for (std::string_view path : paths) {
    node* at = root_.get();
    while (!path.empty()) {
      const size_t dot = path.find('.');
      std::string_view part = path.substr(0, dot);
      path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
      const bool each = part.ends_with("[]");
      if (each) part.remove_suffix(2);
      at = &at->keys.try_emplace(std::string(part)).first->second;
      if (each) {
        if (!at->elements) at->elements = std::make_unique<node>();
        at = at->elements.get();
      }
    }
  }
}
record_fields::record_fields(record_fields&&) noexcept = default;
record_fields& record_fields::operator=(record_fields&&) noexcept = default;
record_fields::~record_fields() = default;

namespace {

// Builds the fields of a record that a record_fields names, from nlohmann's SAX events: the
// document is lexed whole (it must be valid JSON, nested at most max_json_depth deep), but
// values nobody asked for are dropped as they are read.
class field_builder final : public nlohmann::json_sax<json> {
 public:
  explicit field_builder(const record_fields::node& root) : root_(&root) {}

  json result;
  std::string schema;  // the top-level "schema", whichever fields are kept

  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return scalar(v); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(v); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
  bool binary(binary_t&) override { return false; }  // not in JSON text
  bool string(string_t& v) override {
    if (depth_ == 1 && top_schema_) schema = v;
    return scalar(std::move(v));
  }
  bool start_object(std::size_t) override { return open(json::value_t::object); }
  bool start_array(std::size_t) override { return open(json::value_t::array); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      top_schema_ = k == "schema";
      if (top_schema_) schema.clear();  // a repeated key: the last one counts
    }
    frame& f = frames_.back();
    if (!f.target) return true;
    auto it = f.spec->keys.find(k);
    f.next = it == f.spec->keys.end() ? nullptr : &it->second;
    if (f.next) f.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  // A container being read: where its kept values go (null: nothing of it is kept), what of it
  // is kept, and, in an object, the kept key whose value comes next.
  struct frame {
    json* target = nullptr;
    const record_fields::node* spec = nullptr;
    const record_fields::node* next = nullptr;
    std::string key;
  };

  // Where a value read now goes, and what of it is kept (null: dropped).
  std::pair<json*, const record_fields::node*> slot() {
    if (frames_.empty()) return {nullptr, nullptr};
    frame& f = frames_.back();
    if (!f.target) return {nullptr, nullptr};
    if (f.target->is_array()) {
      if (!f.spec) return {nullptr, nullptr};
      f.target->push_back(nullptr);
      return {&f.target->back(), f.spec};
    }
    if (!f.next) return {nullptr, nullptr};
    const record_fields::node* spec = f.next;
    f.next = nullptr;
    return {&(*f.target)[f.key], spec};
  }

  // A value is built only where it is kept: most of a record's values are dropped unbuilt.
  template <class T>
  bool scalar(T&& v) {
    if (depth_ == 0) return false;  // a top-level scalar is no record
    if (auto [to, spec] = slot(); to) *to = json(std::forward<T>(v));
    return true;
  }

  bool open(json::value_t type) {
    if (++depth_ > max_json_depth) return false;
    if (depth_ == 1) {
      if (type != json::value_t::object) return false;
      result = json::object();
      frames_.push_back({&result, root_});
      return true;
    }
    auto [to, spec] = slot();
    if (!to) {
      frames_.push_back({});
      return true;
    }
    *to = json(type);
    // An object is read into when fields of it are asked for, an array when its elements are;
    // otherwise it stays empty, of its type.
    const bool into =
        type == json::value_t::object ? !spec->keys.empty() : spec->elements != nullptr;
    if (!into) {
      frames_.push_back({});
      return true;
    }
    frames_.push_back(
        {to, type == json::value_t::object ? spec : spec->elements.get(), nullptr, {}});
    return true;
  }

  bool close() {
    --depth_;
    frames_.pop_back();
    return true;
  }

  const record_fields::node* root_;  // copyable: a fresh builder is copied in to start again
  std::vector<frame> frames_;
  size_t depth_ = 0;
  bool top_schema_ = false;  // the last top-level key is "schema"
};

// Reads only a line's top-level "schema" and "run_id" while checking that the whole line is
// JSON that parse_record would take (a torn or garbled line, or one nested deeper than
// max_json_depth, is no record). No document is built: a record is a few kilobytes, and a merge
// reads every one of them.
class record_keys final : public nlohmann::json_sax<json> {
 public:
  std::string schema, run_id;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool string(string_t& v) override {
    if (depth_ == 1 && key_ == "schema") schema = v;
    if (depth_ == 1 && key_ == "run_id") run_id = v;
    return value();
  }
  bool start_object(std::size_t) override { return ++depth_ <= max_json_depth; }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return ++depth_ <= max_json_depth; }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      key_ = k;
      // A repeated key: the document keeps the last value, whatever its type.
      if (k == "schema") schema.clear();
      if (k == "run_id") run_id.clear();
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  // A value at the top level is not an object: no record.
  bool value() const { return depth_ > 0; }
  size_t depth_ = 0;
  std::string key_;
};

// The whole document, from SAX events: what json::parse builds (its own builder, wrapped).
class document_builder final : public nlohmann::json_sax<json> {
 public:
  explicit document_builder(json& into) : dom_(into, /*allow_exceptions_=*/false) {}
  bool null() override { return dom_.null(); }
  bool boolean(bool v) override { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) override { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) override {
    return dom_.number_float(v, s);
  }
  bool string(string_t& v) override { return dom_.string(v); }
  bool binary(binary_t& v) override { return dom_.binary(v); }
  bool start_object(std::size_t n) override { return dom_.start_object(n); }
  bool key(string_t& k) override { return dom_.key(k); }
  bool end_object() override { return dom_.end_object(); }
  bool start_array(std::size_t n) override { return dom_.start_array(n); }
  bool end_array() override { return dom_.end_array(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  nlohmann::detail::json_sax_dom_parser<json> dom_;
};

}  // namespace

json parse_record(std::string_view line, const record_fields* keep) {
  if (!keep) {
    if (json_too_deep(line)) return nullptr;  // no record nests that deep; reports would overflow
    json j;
    document_builder b(j);
    if (!sax_parse_fast(line, b))  // declined, or not JSON: nlohmann's lexer decides
      j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return nullptr;
    auto schema = j.find("schema");
    if (schema == j.end() || !schema->is_string() || *schema != run_schema) return nullptr;
    return j;
  }
  const field_builder fresh(keep->root());
  field_builder b = fresh;
  if (!sax_parse(line, b, fresh) || b.schema != run_schema) return nullptr;
  return std::move(b.result);
}

std::optional<std::string> record_run_id(std::string_view line) {
  if (line.empty()) return std::nullopt;
  record_keys keys;
  if (!sax_parse(line, keys, record_keys()) || keys.schema != run_schema) return std::nullopt;
  return std::move(keys.run_id);
}

status for_each_line(
    const fs::path& results_file,
    const std::function<status(std::string_view line, record_location where)>& visit) {
  unique_fd fd(::open(results_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return {};
    return sys_error(errno, "open {}", results_file.string());
  }
  // Reads of 64 KiB: few enough system calls for a file of a hundred thousand records, and a
  // buffer whose size does not depend on the file.
  constexpr size_t chunk_size = 64 * 1024;
  const auto chunk = std::make_unique_for_overwrite<char[]>(chunk_size);
  std::string partial;       // the start of a line that continues in the next chunk
  uint64_t line_offset = 0;  // where the line being assembled starts in the file
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk.get(), chunk_size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", results_file.string());
    if (n == 0) break;  // what is left in `partial` is a torn last line: the run is not recorded
    const char* data = chunk.get();
    size_t start = 0, end = static_cast<size_t>(n);
    while (start < end) {
      const void* nl = std::memchr(data + start, '\n', end - start);
      if (!nl) {
        partial.append(data + start, end - start);
        break;
      }
      size_t stop = static_cast<size_t>(static_cast<const char*>(nl) - data);
      std::string_view line(data + start, stop - start);
      if (!partial.empty()) {
        partial.append(line);
        line = partial;
      }
      record_location where{line_offset, line.size()};
      line_offset += line.size() + 1;
      start = stop + 1;
      EB_TRY(visit(line, where));
      partial.clear();
    }
  }
  return {};
}

fs::path results_dir::run_dir(const std::string& run_id) const { return root_ / "runs" / run_id; }

status results_dir::create() const { return make_dirs(root_ / "runs"); }

namespace {

// results_dir::for_each_record of `file`, with or without `keep`.
status for_each_record_of(
    const fs::path& file, const record_fields* keep,
    const std::function<status(const json& record, record_location where)>& visit) {
  return for_each_line(file, [&](std::string_view line, record_location where) -> status {
    if (line.empty()) return {};
    json record = parse_record(line, keep);
    return record.is_null() ? status{} : visit(record, where);
  });
}

}  // namespace

status results_dir::for_each_record(
    const std::function<status(const json& record, record_location where)>& visit) const {
  return for_each_record_of(results_file(), nullptr, visit);
}

status results_dir::for_each_record(
    const record_fields& keep,
    const std::function<status(const json& record, record_location where)>& visit) const {
  return for_each_record_of(results_file(), &keep, visit);
}

result<std::vector<json>> results_dir::read_records() const {
  std::vector<json> out;
  EB_TRY(for_each_record([&](const json& record, record_location) -> status {
    out.push_back(record);
    return {};
  }));
  return out;
}

result<std::set<std::string>> results_dir::recorded_ids() const {
  std::set<std::string> ids;
  EB_TRY(for_each_record([&](const json& record, record_location) -> status {
    auto id = record.find("run_id");
    ids.insert(id != record.end() && id->is_string() ? id->get<std::string>() : std::string());
    return {};
  }));
  return ids;
}

status results_dir::record(const json& run) const {
  std::string id = run.value("run_id", "");
  const fs::path dir = run_dir(id);
  EB_TRY(write_file_replace(dir / "run.json", pretty_json(run)));
  // The run's line in results.jsonl is its commit: what it points to is durable first, in one
  // sync (two fsyncs and a directory's for each file cost ~0.4 ms apiece on ext4).
  std::vector<fs::path> files{dir / "run.json"};
  std::error_code ec;
  if (fs::exists(dir / transcript_file_name, ec)) files.push_back(dir / transcript_file_name);
  EB_TRY(sync_durable(dir, files));
  // One write per record under O_APPEND: concurrent shard processes never interleave lines.
  return append_durable(results_file(), canonical_json(run) + "\n");
}

namespace {

// `size` bytes of `fd` at `offset` into `out`, fewer only at the end of the file.
status read_at(int fd, uint64_t offset, uint64_t size, std::string& out, const fs::path& shown) {
  out.resize(static_cast<size_t>(size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n =
        ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "read {}", shown.string());
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return {};
}

}  // namespace

result<record_reader> record_reader::open(const fs::path& results_file) {
  unique_fd fd(::open(results_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", results_file.string());
  return record_reader(std::move(fd), results_file);
}

result<json> record_reader::read(record_location where, const record_fields* keep) const {
  // Kept between reads, one per thread: a fresh buffer of a few kilobytes per record made glibc
  // consolidate its free lists on every read.
  thread_local std::string line;
  EB_TRY(read_at(fd_.get(), where.offset, where.size, line, path_));
  json record;
  if (line.size() == where.size) record = parse_record(line, keep);
  if (record.is_null())
    return make_error(error_kind::io, "{}: no run record at byte {} any more (was it rewritten?)",
                      path_.string(), where.offset);
  return record;
}

result<record_spill> record_spill::create() {
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec);
  if (ec) return make_error(error_kind::io, "no temporary directory: {}", ec.message());
  unique_fd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd) {
    // A filesystem without O_TMPFILE: a named file, unlinked at once.
    std::string name = (dir / ("evalbox-records-" + random_suffix())).string();
    fd = unique_fd(::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return sys_error(errno, "create a temporary file in {}", dir.string());
    ::unlink(name.c_str());
  }
  return record_spill(std::move(fd), dir / "(records set aside)");
}

result<record_location> record_spill::add(std::string_view bytes) {
  const record_location at{written_ + buffer_.size(), bytes.size()};
  buffer_.append(bytes);
  if (buffer_.size() >= (64u << 10)) EB_TRY(flush());  // a buffer that does not grow with the runs
  return at;
}

status record_spill::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::pwrite(fd_.get(), buffer_.data() + done, buffer_.size() - done,
                         static_cast<off_t>(written_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(errno, "write {}", shown_.string());
    done += static_cast<size_t>(n);
  }
  written_ += buffer_.size();
  buffer_.clear();
  return {};
}

result<record_spill::reader> record_spill::finish() && {
  EB_TRY(flush());
  return reader(std::move(fd_), std::move(shown_));
}

status record_spill::reader::read(record_location where, std::string& out) const {
  EB_TRY(read_at(fd_.get(), where.offset, where.size, out, shown_));
  if (out.size() != where.size)
    return make_error(error_kind::io, "{}: {} bytes at byte {} are gone", shown_.string(),
                      where.size, where.offset);
  return {};
}

}  // namespace results
}  // namespace evalbox::harness
