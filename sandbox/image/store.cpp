// The image store (see store.h): import, hold, list, remove and collect images and layers.
#include "sandbox/image/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "base/digest.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/units.h"
#include "sandbox/image/layer.h"
#include "sandbox/image/reference.h"
#include "sandbox/image/registry.h"
#include "sandbox/image/source.h"

namespace evalbox::sandbox::image {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view store_schema = "evalbox.image-store.v1";
constexpr std::string_view image_schema = "evalbox.image.v1";
constexpr std::string_view layer_schema = "evalbox.layer.v1";

std::string hex_of(const std::string& digest) {
  auto colon = digest.find(':');
  return colon == std::string::npos ? digest : digest.substr(colon + 1);
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Opens (creating) `path` and takes flock `op` on it. Retries when the file was unlinked and
// replaced while we waited (gc removes a layer's lock files while holding them), so the lock
// held is always on the file that the path names. LOCK_NB contention -> busy. Unlocked before
// it is closed (locked_fd): gc and `image rm` find a released layer free at once.
result<locked_fd> lock_file(const fs::path& path, int op) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    unique_fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return sys_error(errno, "open lock {}", path.string());
    int rc;
    while ((rc = ::flock(fd.get(), op)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
      if (errno == EWOULDBLOCK)
        return make_error(error_kind::busy, "{} is in use", path.filename().string());
      return sys_error(errno, "flock {}", path.string());
    }
    struct stat held {
    }, named{};
    if (::fstat(fd.get(), &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev)
      return locked_fd(std::move(fd));
  }
  return make_error(error_kind::busy, "lock {} keeps being replaced", path.string());
}

bool path_exists(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

// Removes a layer tree. Without root, a directory the image made 0555 must be made writable
// before its entries can go (root needs no such help).
status remove_layer_tree(const fs::path& dir) {
  if (::geteuid() != 0 && path_exists(dir)) {
    ::nftw(
        dir.c_str(),
        [](const char* p, const struct stat* st, int type, struct FTW*) {
          if (type == FTW_D || type == FTW_DNR) ::chmod(p, (st->st_mode & 07777) | S_IRWXU);
          return 0;
        },
        64, FTW_PHYS | FTW_MOUNT);
  }
  return remove_tree(dir);
}

status fsync_dir(const fs::path& dir) {
  unique_fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0) return sys_error(errno, "fsync {}", dir.string());
  return {};
}

json layer_to_json(const layer_info& l) {
  return json{{"diff_id", l.diff_id},
              {"digest", l.digest},
              {"compression", l.compression},
              {"blob_bytes", l.blob_bytes},
              {"bytes", l.bytes},
              {"entries", l.entries},
              {"devices_skipped", l.devices_skipped}};
}

std::string unique_suffix() { return random_suffix(); }

}  // namespace

result<layer_limits> parse_limits(std::string_view max_bytes, std::string_view max_entries,
                                  layer_limits base) {
  if (!max_bytes.empty()) {
    auto bytes = parse_bytes(max_bytes);
    if (!bytes || *bytes == 0)
      return make_error(error_kind::invalid_argument,
                        "EVALBOX_IMAGE_MAX_LAYER_BYTES='{}': expected a size such as 32GiB",
                        max_bytes);
    base.max_bytes = *bytes;
  }
  if (!max_entries.empty()) {
    const std::string v(max_entries);
    char* end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (!end || *end != '\0' || n == 0)
      return make_error(error_kind::invalid_argument,
                        "EVALBOX_IMAGE_MAX_LAYER_ENTRIES='{}': expected a positive count", v);
    base.max_entries = n;
  }
  return base;
}

result<pull_policy> parse_pull_policy(std::string_view text) {
  if (text == "missing") return pull_policy::missing;
  if (text == "always") return pull_policy::always;
  if (text == "never") return pull_policy::never;
  return make_error(error_kind::invalid_argument,
                    "--pull {}: expected missing (the default), always or never", text);
}

std::string_view to_string(pull_policy p) noexcept {
  switch (p) {
    case pull_policy::always:
      return "always";
    case pull_policy::never:
      return "never";
    case pull_policy::missing:
      break;
  }
  return "missing";
}

std::vector<fs::path> image_info::lower_dirs() const {
  std::vector<fs::path> out;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) out.push_back(it->dir);
  return out;
}

json image_info::to_json() const {
  json ls = json::array();
  for (const auto& l : layers) ls.push_back(layer_to_json(l));
  return json{{"schema", image_schema},
              {"id", id},
              {"manifest_digests", manifest_digests},
              {"references", references},
              {"config", config.to_json()},
              {"layers", ls},
              {"bytes", bytes},
              {"created", created},
              {"last_used", last_used}};
}

// ---- opening ----

result<store> store::open(store_options options) {
  store s;
  s.options_ = std::move(options);
  s.root_ = s.options_.state_root / "images";
  const bool root = ::geteuid() == 0;
  if (!root && s.options_.owner_uid != ::geteuid())
    return make_error(error_kind::invalid_argument,
                      "image store {}: without root every layer is owned by the invoking user "
                      "(uid {}), not uid {}",
                      s.root_.string(), ::geteuid(), s.options_.owner_uid);
  // The state root as the preparer makes it (0700), if the store comes first.
  EB_TRY_CTX(make_dirs(s.options_.state_root, 0700),
             fmt::format("image store {}", s.root_.string()));
  // images/ and layers/ (and each layer) are 0711: the sandbox's own root (the owner id) may
  // walk to a layer tree it knows the name of — an overlay mounted inside the sandbox's user
  // namespace looks its lowers up as that id — but may list nothing. locks/ and records/ stay
  // private.
  for (const auto& [sub, mode] : {std::pair{"", 0711}, std::pair{"layers", 0711},
                                  std::pair{"locks", 0700}, std::pair{"records", 0700}}) {
    const fs::path dir = s.root_ / sub;
    EB_TRY_CTX(make_dirs(dir, static_cast<mode_t>(mode)),
               fmt::format("image store {}", s.root_.string()));
    if (::chmod(dir.c_str(), static_cast<mode_t>(mode)) != 0)
      return sys_error(errno, "chmod {}", dir.string());
  }

  const fs::path meta = s.root_ / "store.json";
  if (!path_exists(meta)) {
    sys::whiteout_form form = s.options_.whiteout
                                  ? *s.options_.whiteout
                                  : (root ? sys::whiteout_form::char_device
                                          : sys::probe_whiteout_form(s.root_ / "layers"));
    json j{{"schema", store_schema},
           {"owner_uid", s.options_.owner_uid},
           {"owner_gid", s.options_.owner_gid},
           {"whiteout", std::string(sys::to_string(form))}};
    // Written beside and linked into place: two first users agree on one file.
    fs::path tmp = s.root_ / (".store.json-" + unique_suffix());
    EB_TRY(write_file(tmp, pretty_json(j), 0600));
    if (::link(tmp.c_str(), meta.c_str()) != 0 && errno != EEXIST) {
      int err = errno;
      ::unlink(tmp.c_str());
      return sys_error(err, "create {}", meta.string());
    }
    ::unlink(tmp.c_str());
    EB_TRY(fsync_dir(s.root_));
  }
  json j = EB_TRY(read_json_file(meta));
  if (!j.is_object() || j.value("schema", "") != store_schema)
    return make_error(error_kind::invalid_argument, "{}: not an evalbox image store ({})",
                      meta.string(), store_schema);
  uid_t uid = j.value("owner_uid", 0u);
  gid_t gid = j.value("owner_gid", 0u);
  if (uid != s.options_.owner_uid || gid != s.options_.owner_gid)
    return make_error(error_kind::invalid_argument,
                      "image store {} belongs to {}:{}, but this evalbox maps the sandbox to "
                      "{}:{} (set EVALBOX_SANDBOX_UID={} or EVALBOX_STATE_DIR to another "
                      "directory, or remove {})",
                      s.root_.string(), uid, gid, s.options_.owner_uid, s.options_.owner_gid, uid,
                      s.root_.string());
  std::string form = j.value("whiteout", "char_device");
  if (form == "char_device")
    s.whiteout_ = sys::whiteout_form::char_device;
  else if (form == "user_xattr")
    s.whiteout_ = sys::whiteout_form::user_xattr;
  else
    s.whiteout_ = sys::whiteout_form::copy;
  return s;
}

// ---- records ----

result<layer_info> store::read_layer(const std::string& diff_id) {
  const fs::path dir = root_ / "layers" / hex_of(diff_id);
  json j = EB_TRY(read_json_file(dir / "layer.json"));
  if (!j.is_object() || j.value("schema", "") != layer_schema || j.value("diff_id", "") != diff_id)
    return make_error(error_kind::invalid_argument, "{}: not the record of layer {}",
                      (dir / "layer.json").string(), diff_id);
  layer_info l;
  l.diff_id = diff_id;
  l.digest = j.value("digest", "");
  l.compression = j.value("compression", "");
  l.blob_bytes = j.value("blob_bytes", uint64_t{0});
  l.bytes = j.value("bytes", uint64_t{0});
  l.entries = j.value("entries", uint64_t{0});
  l.devices_skipped = j.value("devices_skipped", uint64_t{0});
  l.dir = dir / "tree";
  return l;
}

result<image_info> store::read_record(const fs::path& file) {
  json j = EB_TRY(read_json_file(file));
  if (!j.is_object() || j.value("schema", "") != image_schema)
    return make_error(error_kind::invalid_argument, "{}: not an {} record", file.string(),
                      image_schema);
  image_info info;
  try {
    info.id = j.at("id").get<std::string>();
    info.manifest_digests = j.value("manifest_digests", std::vector<std::string>{});
    info.references = j.value("references", std::vector<std::string>{});
    info.config = EB_TRY(image_config::from_json(j.at("config")));
    info.created = j.value("created", int64_t{0});
    for (const auto& l : j.at("layers")) {
      layer_info li;
      li.diff_id = l.at("diff_id").get<std::string>();
      li.digest = l.value("digest", "");
      li.compression = l.value("compression", "");
      li.blob_bytes = l.value("blob_bytes", uint64_t{0});
      li.bytes = l.value("bytes", uint64_t{0});
      li.entries = l.value("entries", uint64_t{0});
      li.devices_skipped = l.value("devices_skipped", uint64_t{0});
      li.dir = root_ / "layers" / hex_of(li.diff_id) / "tree";
      info.bytes += li.bytes;
      info.layers.push_back(std::move(li));
    }
  } catch (const std::exception& e) {
    return make_error(error_kind::invalid_argument, "{}: malformed record: {}", file.string(),
                      e.what());
  }
  struct stat st {};
  fs::path used = file;
  used.replace_extension(".used");
  info.last_used = ::stat(used.c_str(), &st) == 0 ? st.st_mtim.tv_sec : info.created;
  return info;
}

result<std::vector<image_info>> store::read_records() {
  std::vector<image_info> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ / "records", ec)) {
    const auto& p = entry.path();
    if (p.extension() != ".json" || p.filename().string().starts_with(".")) continue;
    auto info = read_record(p);
    if (!info) {
      if (info.error().kind == error_kind::not_found) continue;  // removed meanwhile
      return std::unexpected(std::move(info).error());
    }
    out.push_back(std::move(*info));
  }
  if (ec)
    return make_error(kind_from_errno(ec.value()), "list {}: {}", (root_ / "records").string(),
                      ec.message());
  return out;
}

// ---- import ----

result<import_result> store::import(std::string_view reference, const fs::path& base_dir,
                                    const import_options& options) {
  std::vector<locked_fd> locks;
  return import_held(reference, base_dir, options, locks);
}

result<image_use> store::acquire(std::string_view reference, const fs::path& base_dir,
                                 const import_options& options) {
  image_use use;
  auto r = EB_TRY(import_held(reference, base_dir, options, use.locks_));
  use.info_ = std::move(r.image);
  return use;
}

// One import, start to end: run() is the list of its passes. They share the image as resolved,
// the targets, the locks held and the counts, which is why they are members of one object that
// lives as long as the import; the store's own state (root, owner, whiteout form, records) is
// reached through `store_`.
class store::importer {
 public:
  importer(store& s, const import_options& options, std::vector<locked_fd>& locks,
           std::vector<std::string>& hexes, std::vector<std::string>& published)
      : store_(s),
        options_(options),
        locks_(locks),
        hexes_(hexes),
        published_(published),
        flatten_(s.whiteout_ == sys::whiteout_form::copy),
        writer_(writer_options_for(s, flatten_)) {}

  result<import_result> run(std::string_view text, const fs::path& base_dir) {
    EB_TRY(resolve(text, base_dir));  // the metadata, read and verified: nothing stored yet
    choose_targets();                 // what the store keeps: a tree per layer, or one flattened
    EB_TRY(hold_targets());           // each held before it is looked at: gc cannot take it
    EB_TRY(unpack_missing());         // each missing one unpacked aside, renamed in when whole
    EB_TRY(write_record());           // last: a record names only layers that exist
    return std::move(out_);
  }

 private:
  // A directory the store keeps: a layer keyed by its diff_id, or a flattened image keyed by
  // its chain id.
  struct target {
    std::string key;     // "sha256:<hex>"
    std::string digest;  // the blob's, for a single layer
    int64_t size = -1;
  };
  // Writes one target's content into a tree writer: a layer, a root filesystem, or every layer.
  using filler = std::function<result<layer_result>(tree_writer&)>;

  // How this store's trees are written: owned by the store's owner (chowned only as root; a
  // rootless writer owns what it writes), in its whiteout form, within its layer limits.
  static writer_options writer_options_for(const store& s, bool flatten) {
    const bool as_root = ::geteuid() == 0;
    writer_options w;
    w.owner_uid = s.options_.owner_uid;
    w.owner_gid = s.options_.owner_gid;
    w.chown = as_root;
    w.trusted_opaque = as_root;
    w.whiteout = s.whiteout_;
    w.flatten = flatten;
    w.limits = s.options_.limits;
    return w;
  }

  void emit(import_event e) const {
    std::lock_guard lock(mu_);
    if (options_.progress) options_.progress(e);
  }
  // Counts kept while layers unpack on several threads (a registry's downloads).
  template <class F>
  void count(F&& f) {
    std::lock_guard lock(mu_);
    f(out_);
  }
  [[nodiscard]] const fs::path& root() const { return store_.root_; }
  [[nodiscard]] std::string describe(size_t t) const {
    return flatten_
               ? fmt::format("image {}: flattened layers {}", name_, targets_[t].key)
               : fmt::format("image {}: layer {}/{} {}", name_, t + 1, count_, targets_[t].key);
  }

  status resolve(std::string_view text, const fs::path& base_dir);
  void choose_targets();
  status hold_targets();
  status unpack_missing();
  status unpack_target(size_t t, const filler& fill);
  status fill_and_publish(size_t t, const filler& fill, const fs::path& tmp,
                          std::chrono::steady_clock::time_point started);
  [[nodiscard]] json layer_meta(const target& l, const layer_result& res) const;
  result<layer_result> copy_rootfs_into(tree_writer& w);
  result<layer_result> flatten_into(tree_writer& w);
  result<layer_result> unpack_from_source(size_t i, byte_source& blob, tree_writer& w);
  status write_record();
  bool merge_earlier_record(const fs::path& record, image_info& info) const;

  store& store_;
  const import_options& options_;
  std::vector<locked_fd>& locks_;        // each target's .use lock, shared (import_held keeps them)
  std::vector<std::string>& hexes_;      // the hex each of locks_ is for
  std::vector<std::string>& published_;  // the layers this import published (hexes)
  const bool flatten_;                   // the store's whiteout form is "copy": one tree per image
  const writer_options writer_;
  reference ref_;
  std::string name_;  // ref_'s canonical text
  std::unique_ptr<image_source> source_;
  resolved_image image_;
  size_t count_ = 0;  // layers in the image
  std::vector<target> targets_;
  std::vector<size_t> missing_;  // targets not in the store yet (indexes into targets_)
  import_result out_;
  mutable std::mutex mu_;  // out_'s counts and progress calls, from download threads
  // The settings this import pulls with: the caller's (or the host's), with this import's
  // cancel flag, so that Ctrl-C ends a wait on the registry too.
  std::optional<registry_settings> registry_;
};

// The reference parsed and its source opened; the index, manifest and config read and their
// digests checked. Nothing is held or written yet.
status store::importer::resolve(std::string_view text, const fs::path& base_dir) {
  ref_ = EB_TRY(parse_reference(text, base_dir));
  name_ = ref_.str();
  if (ref_.kind == transport::docker) {
    registry_ = options_.registry ? *options_.registry : EB_TRY(registry_settings_from_host());
    if (options_.cancel) registry_->cancel = options_.cancel;
  }
  source_ = EB_TRY(image_source::open(ref_, registry_ ? &*registry_ : nullptr));
  image_ = EB_TRY(source_->resolve());
  out_.pulled = ref_.kind == transport::docker;
  out_.reference_digest = image_.reference_digest;
  count_ = image_.layers.size();
  emit({import_event::kind::resolved, 0, count_, image_.config_digest, 0, -1, 0});
  return {};
}

// What the store keeps of this image: one directory per layer, keyed by its diff_id — or, when
// this store can express no whiteout (form "copy"), one flattened tree keyed by the image's
// chain id (OCI: ChainID(L0) = DiffID(L0), ChainID(L0..n) = sha256(ChainID(L0..n-1) + " " +
// DiffID(Ln))), all layers applied onto it in order.
void store::importer::choose_targets() {
  if (flatten_) {
    std::string chain = image_.layers.front().diff_id;
    for (size_t i = 1; i < count_; ++i)
      chain = "sha256:" + sha256_hex(chain + " " + image_.layers[i].diff_id);
    targets_.push_back({chain, "", -1});
  } else {
    for (const auto& l : image_.layers) targets_.push_back({l.diff_id, l.digest, l.size});
  }
}

// Holds every target (shared) before looking at it: from here gc cannot remove any of them.
// Those not in the store yet are the missing ones.
status store::importer::hold_targets() {
  std::set<std::string> seen;
  for (size_t t = 0; t < targets_.size(); ++t) {
    const std::string hex = hex_of(targets_[t].key);
    if (!seen.insert(hex).second) continue;
    locks_.push_back(EB_TRY(lock_file(root() / "locks" / (hex + ".use"), LOCK_SH)));
    hexes_.push_back(hex);
    if (path_exists(root() / "layers" / hex)) {
      ++out_.layers_present;
      emit({import_event::kind::layer_present, t, targets_.size(), targets_[t].key, 0, -1, 0});
    } else {
      missing_.push_back(t);
    }
  }
  return {};
}

// Unpacks what is missing, as the source holds it: a root filesystem copied, an image
// flattened onto one tree, or each missing layer streamed from the source.
status store::importer::unpack_missing() {
  if (missing_.empty()) return {};
  if (ref_.kind == transport::rootfs)
    return unpack_target(0, [&](tree_writer& w) { return copy_rootfs_into(w); });
  if (flatten_) return unpack_target(0, [&](tree_writer& w) { return flatten_into(w); });
  auto each = [&](size_t i, byte_source& blob) -> status {
    return unpack_target(i, [&](tree_writer& w) { return unpack_from_source(i, blob, w); });
  };
  return source_->for_each_layer(image_, missing_, each);
}

// Unpacks target `t` from `fill` into a temporary, then renames it into place — unless another
// importer (a thread or a process) finished it while this one waited for the unpack lock. A
// failed attempt removes its temporary (or leaves it to gc).
status store::importer::unpack_target(size_t t, const filler& fill) {
  const target& l = targets_[t];
  const std::string hex = hex_of(l.key);
  locked_fd unpacking = EB_TRY(lock_file(root() / "locks" / (hex + ".unpack"), LOCK_EX));
  if (path_exists(root() / "layers" / hex)) {  // another importer finished it while we waited
    count([](import_result& o) { ++o.layers_present; });
    emit({import_event::kind::layer_present, t, targets_.size(), l.key, 0, -1, 0});
    return {};
  }
  emit({import_event::kind::layer_start, t, targets_.size(), l.key, 0, l.size, 0});
  const auto started = std::chrono::steady_clock::now();
  const fs::path tmp = root() / "layers" / fmt::format(".tmp-{}-{}", hex, unique_suffix());
  if (status st = fill_and_publish(t, fill, tmp, started); !st) {
    if (auto rm = remove_layer_tree(tmp); !rm)
      log::warn("image store: leaving {} for gc: {}", tmp.string(), rm.error().message);
    return std::unexpected(std::move(st).error().with_context(describe(t)));
  }
  count([](import_result& o) { ++o.layers_unpacked; });
  return {};
}

// Fills the temporary `tmp` (its tree/ and layer.json), syncs it when the store is durable and
// publishes it under the target's name: the rename is what makes a layer exist, so a crash
// before it leaves only a .tmp-* that nothing reads.
status store::importer::fill_and_publish(size_t t, const filler& fill, const fs::path& tmp,
                                         std::chrono::steady_clock::time_point started) {
  const target& l = targets_[t];
  const fs::path final_dir = root() / "layers" / hex_of(l.key);
  const bool durable = store_.options_.durable;
  if (::mkdir(tmp.c_str(), 0711) != 0 || ::chmod(tmp.c_str(), 0711) != 0)
    return sys_error(errno, "mkdir {}", tmp.string());
  if (::mkdir((tmp / "tree").c_str(), 0755) != 0)
    return sys_error(errno, "mkdir {}", (tmp / "tree").string());
  tree_writer writer = EB_TRY(tree_writer::open(tmp / "tree", writer_));
  layer_result res = EB_TRY(fill(writer));
  EB_TRY(writer.finish());
  count([&](import_result& o) {
    o.devices_skipped += res.devices_skipped;
    o.blob_bytes += res.blob_bytes;
  });
  EB_TRY(write_file(tmp / "layer.json", pretty_json(layer_meta(l, res)), 0600));
  if (durable) {
    unique_fd fd(::open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd || ::syncfs(fd.get()) != 0) return sys_error(errno, "syncfs {}", tmp.string());
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_NOREPLACE) != 0)
    return sys_error(errno, "publish layer {}", final_dir.string());
  count([&](import_result&) { published_.push_back(hex_of(l.key)); });
  if (durable) EB_TRY(fsync_dir(root() / "layers"));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  emit({import_event::kind::layer_done, t, targets_.size(), l.key, res.blob_bytes, l.size, secs});
  return {};
}

// A finished layer's layer.json: its digests and sizes, when and from what it was unpacked.
json store::importer::layer_meta(const target& l, const layer_result& res) const {
  json meta{{"schema", layer_schema},
            {"diff_id", l.key},
            {"digest", l.digest},
            {"compression", res.compression},
            {"blob_bytes", res.blob_bytes},
            {"bytes", res.bytes},
            {"entries", res.entries},
            {"whiteouts", res.whiteouts},
            {"devices_skipped", res.devices_skipped},
            {"tar_bytes", res.tar_bytes},
            {"unpacked", now_seconds()},
            {"from", name_}};
  if (flatten_) {
    json from = json::array();
    for (const auto& il : image_.layers) from.push_back(il.diff_id);
    meta["flattened"] = from;
  }
  return meta;
}

// A root filesystem directory, copied as one layer.
result<layer_result> store::importer::copy_rootfs_into(tree_writer& w) {
  EB_TRY(copy_rootfs(ref_.path, w, options_.cancel));
  layer_result r;
  r.compression = "none";
  r.bytes = w.bytes();
  r.entries = w.entries();
  r.devices_skipped = w.devices_skipped();
  return r;
}

// Every layer in the image's order onto one tree (a tar source is read once per layer).
result<layer_result> store::importer::flatten_into(tree_writer& w) {
  layer_result total;
  total.compression = "flattened";
  for (size_t i = 0; i < count_; ++i) {
    auto one = [&](size_t idx, byte_source& blob) -> status {
      layer_result r = EB_TRY(unpack_from_source(idx, blob, w));
      total.blob_bytes += r.blob_bytes;
      total.tar_bytes += r.tar_bytes;
      total.whiteouts += r.whiteouts;
      return {};
    };
    EB_TRY(source_->for_each_layer(image_, {i}, one));
  }
  total.bytes = w.bytes();
  total.entries = w.entries();
  total.devices_skipped = w.devices_skipped();
  return total;
}

// Streams layer `i` of the image through `w`, its digests checked as it is read.
result<layer_result> store::importer::unpack_from_source(size_t i, byte_source& blob,
                                                         tree_writer& w) {
  const layer_ref& l = image_.layers[i];
  layer_expect expect{l.digest, l.size, l.diff_id};
  unpack_control control;
  control.cancel = options_.cancel;
  control.progress = [&](uint64_t bytes) {
    emit({import_event::kind::layer_progress, i, count_, l.diff_id, bytes, l.size, 0});
  };
  auto r = unpack_layer(blob, expect, w, control);
  if (!r && flatten_)
    return std::unexpected(
        std::move(r).error().with_context(fmt::format("layer {}/{} {}", i + 1, count_, l.diff_id)));
  return r;
}

// The image's record, from its layers as the store now has them, merged with what an earlier
// import of the same image said; its .used file touched (its mtime is the last use).
status store::importer::write_record() {
  image_info info;
  info.id = image_.config_digest;
  info.config = image_.config;
  for (const auto& t : targets_) {
    layer_info li = EB_TRY_CTX(store_.read_layer(t.key), fmt::format("image {}", name_));
    info.bytes += li.bytes;
    info.layers.push_back(std::move(li));
  }
  const fs::path record = root() / "records" / (hex_of(info.id) + ".json");
  info.created = now_seconds();
  // An image imported again as it was (every run of a suite, `sandbox exec --image`) keeps
  // its record: rewriting it durably costs two fsyncs for nothing.
  if (merge_earlier_record(record, info)) {
    json j = info.to_json();
    j.erase("last_used");  // lives in the .used file's mtime
    EB_TRY(write_file_atomic(record, pretty_json(j), 0600));
  }
  fs::path used = record;
  used.replace_extension(".used");
  EB_TRY(write_file(used, "", 0600));  // creating or truncating it sets its mtime
  info.last_used = now_seconds();
  // A tag names one image: the image it named before no longer answers to it.
  if (ref_.kind == transport::docker && ref_.digest.empty())
    EB_TRY(store_.forget_reference(name_, info.id));
  out_.image = std::move(info);
  out_.reference = name_;
  out_.manifest_digest = image_.manifest_digest;
  return {};
}

// Takes the creation time, references and manifest digests of an earlier record of the image
// into `info` and adds this import's. Whether the record must be written (changed, or none).
bool store::importer::merge_earlier_record(const fs::path& record, image_info& info) const {
  bool changed = true;
  if (path_exists(record)) {
    if (auto old = store_.read_record(record)) {
      info.created = old->created;
      info.references = old->references;
      info.manifest_digests = old->manifest_digests;
      changed = false;
    }
  }
  std::vector<std::string> names{name_};
  // A registry image is also known by its digest: what pins a run to these bytes.
  if (ref_.kind == transport::docker && !image_.reference_digest.empty())
    names.push_back(ref_.pinned(image_.reference_digest));
  for (const auto& n : names) {
    if (std::find(info.references.begin(), info.references.end(), n) == info.references.end()) {
      info.references.push_back(n);
      changed = true;
    }
  }
  if (!image_.manifest_digest.empty() &&
      std::find(info.manifest_digests.begin(), info.manifest_digests.end(),
                image_.manifest_digest) == info.manifest_digests.end()) {
    info.manifest_digests.push_back(image_.manifest_digest);
    changed = true;
  }
  return changed;
}

status store::forget_reference(const std::string& reference, const std::string& keep_id) {
  for (auto& other : EB_TRY(read_records())) {
    if (other.id == keep_id) continue;
    auto it = std::find(other.references.begin(), other.references.end(), reference);
    if (it == other.references.end()) continue;
    other.references.erase(it);
    json j = other.to_json();
    j.erase("last_used");
    EB_TRY(
        write_file_atomic(root_ / "records" / (hex_of(other.id) + ".json"), pretty_json(j), 0600));
  }
  return {};
}

// A docker:// reference the store already has, under --pull missing or never: held as a run
// holds it, without asking the registry. nullopt when the store has no such image (or lost a
// layer of it) and the policy allows a pull.
result<std::optional<import_result>> store::from_store(std::string_view text,
                                                       const fs::path& base_dir,
                                                       const import_options& options,
                                                       std::vector<locked_fd>& locks) {
  if (!text.starts_with("docker://") || options.pull == pull_policy::always) return std::nullopt;
  const reference ref = EB_TRY(parse_reference(text, base_dir));
  auto held = use(ref.str());
  if (!held) {
    const bool absent = held.error().kind == error_kind::not_found;
    if (absent && options.pull == pull_policy::missing) return std::nullopt;
    if (absent)
      return make_error(error_kind::not_found,
                        "image {} is not in the image store and pulling is off (--pull never); "
                        "`evalbox image pull {}` fetches it",
                        ref.str(), ref.str().substr(9));
    return std::unexpected(std::move(held).error());
  }
  import_result r;
  r.reference = ref.str();
  r.layers_present = held->image().layers.size();
  if (!held->image().manifest_digests.empty())
    r.manifest_digest = held->image().manifest_digests.back();
  const std::string pinned_prefix = ref.pinned("");
  for (const auto& n : held->image().references)
    if (n.starts_with(pinned_prefix)) r.reference_digest = n.substr(pinned_prefix.size());
  if (!ref.digest.empty()) r.reference_digest = ref.digest;
  r.image = held->image();
  for (auto& l : held->locks_) locks.push_back(std::move(l));
  return r;
}

result<import_result> store::import_held(std::string_view text, const fs::path& base_dir,
                                         const import_options& options,
                                         std::vector<locked_fd>& locks) {
  if (auto r = EB_TRY(from_store(text, base_dir, options, locks))) return std::move(*r);
  std::vector<std::string> hexes, published;
  auto r = importer(*this, options, locks, hexes, published).run(text, base_dir);
  if (!r) {
    // A failed import leaves the store as it found it: the layers it published (a pull whose
    // other layer lied about its digest) and the lock files of layers that did not come to
    // exist go, when nobody else holds them (our shared lock becomes exclusive; an import of
    // another image that shares a layer holds it too, and keeps it).
    for (size_t i = 0; i < hexes.size() && i < locks.size(); ++i) {
      const bool ours = std::find(published.begin(), published.end(), hexes[i]) != published.end();
      if (!ours && path_exists(root_ / "layers" / hexes[i])) continue;
      if (::flock(locks[i].get(), LOCK_EX | LOCK_NB) != 0) continue;
      if (ours) {
        if (auto st = delete_layer(hexes[i]); !st)
          log::warn("image store: leaving layer {} for gc: {}", hexes[i], st.error().message);
        continue;
      }
      ::unlink((root_ / "locks" / (hexes[i] + ".unpack")).c_str());
      ::unlink((root_ / "locks" / (hexes[i] + ".use")).c_str());
    }
    locks.clear();
  }
  return r;
}

// ---- queries ----

result<image_info> store::lookup(std::string_view query, const fs::path& base_dir) {
  // A whole id names its record directly: what every run's preparation asks, without reading
  // the other records.
  if (query.starts_with("sha256:") && is_sha256_hex(query.substr(7))) {
    const fs::path record = root_ / "records" / (std::string(query.substr(7)) + ".json");
    if (path_exists(record)) return read_record(record);
  }
  auto images = EB_TRY(read_records());
  std::string q(query);
  if (query.find(':') != std::string_view::npos && !query.starts_with("sha256:")) {
    auto ref = EB_TRY(parse_reference(query, base_dir));
    const std::string canonical = ref.str();
    // Several images may answer to one reference: a multi-platform index's digest
    // (NAME@sha256:INDEX) names the image of each platform pulled through it. A run wants this
    // host's, not whichever record the directory happens to list first.
    image_info* found = nullptr;
    for (auto& i : images) {
      if (std::find(i.references.begin(), i.references.end(), canonical) == i.references.end())
        continue;
      if (!found) found = &i;
      if (platform_matches({i.config.os, i.config.architecture, i.config.variant},
                           host_platform())) {
        found = &i;
        break;
      }
    }
    if (found) return std::move(*found);
    return make_error(error_kind::not_found,
                      "image {} is not in the store {} (evalbox image import {})", canonical,
                      root_.string(), canonical);
  }
  std::string hex = query.starts_with("sha256:") ? q.substr(7) : q;
  if (hex.size() < 8 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return make_error(error_kind::invalid_argument,
                      "'{}': name an image by reference (oci:DIR...), by id or manifest digest "
                      "(sha256:HEX), or by at least 8 hex digits of one",
                      query);
  std::vector<image_info*> matches;
  for (auto& i : images) {
    bool hit = hex_of(i.id).starts_with(hex);
    for (const auto& m : i.manifest_digests) hit = hit || hex_of(m).starts_with(hex);
    if (hit) matches.push_back(&i);
  }
  if (matches.empty())
    return make_error(error_kind::not_found, "no image {} in the store {}", query, root_.string());
  if (matches.size() > 1)
    return make_error(error_kind::invalid_argument, "'{}' names {} images; give more digits", query,
                      matches.size());
  return std::move(*matches.front());
}

result<std::vector<image_info>> store::list() {
  auto images = EB_TRY(read_records());
  std::sort(images.begin(), images.end(), [](const image_info& a, const image_info& b) {
    return a.last_used != b.last_used ? a.last_used > b.last_used : a.id < b.id;
  });
  return images;
}

result<image_use> store::use(std::string_view query, const fs::path& base_dir) {
  image_use u;
  u.info_ = EB_TRY(lookup(query, base_dir));
  std::set<std::string> seen;
  for (const auto& l : u.info_.layers) {
    const std::string hex = hex_of(l.diff_id);
    if (!seen.insert(hex).second) continue;
    u.locks_.push_back(EB_TRY(lock_file(root_ / "locks" / (hex + ".use"), LOCK_SH)));
    if (!path_exists(root_ / "layers" / hex))
      return make_error(error_kind::not_found,
                        "image {}: layer {} was removed; import the image again", u.info_.id,
                        l.diff_id);
  }
  fs::path used = root_ / "records" / (hex_of(u.info_.id) + ".used");
  if (::utimensat(AT_FDCWD, used.c_str(), nullptr, 0) != 0)
    log::debug("image store: touch {}: {}", used.string(), errno_name(errno));
  u.info_.last_used = now_seconds();
  return u;
}

result<uint64_t> store::size() {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ / "layers", ec)) {
    std::string n = entry.path().filename().string();
    if (!is_sha256_hex(n)) continue;
    if (auto l = read_layer("sha256:" + n)) total += l->bytes;
  }
  return total;
}

// ---- removal ----

status store::delete_layer(const std::string& hex) {
  const fs::path dir = root_ / "layers" / hex;
  if (path_exists(dir)) {
    const fs::path doomed = root_ / "layers" / fmt::format(".del-{}-{}", hex, unique_suffix());
    if (::rename(dir.c_str(), doomed.c_str()) != 0)
      return sys_error(errno, "rename {}", dir.string());
    EB_TRY(remove_layer_tree(doomed));
  }
  ::unlink((root_ / "locks" / (hex + ".unpack")).c_str());
  ::unlink((root_ / "locks" / (hex + ".use")).c_str());
  return {};
}

status store::remove(std::string_view query, const fs::path& base_dir) {
  image_info victim = EB_TRY(lookup(query, base_dir));
  auto images = EB_TRY(read_records());
  std::set<std::string> others;
  for (const auto& i : images)
    if (i.id != victim.id)
      for (const auto& l : i.layers) others.insert(hex_of(l.diff_id));
  // Every layer of the image, shared or not, must be free: a run holding it is using it.
  std::map<std::string, locked_fd> held;
  for (const auto& l : victim.layers) {
    const std::string hex = hex_of(l.diff_id);
    if (held.count(hex)) continue;
    auto lock = lock_file(root_ / "locks" / (hex + ".use"), LOCK_EX | LOCK_NB);
    if (!lock) {
      if (lock.error().kind == error_kind::busy)
        return make_error(error_kind::busy,
                          "image {} is in use (a run holds layer {}); nothing was removed",
                          victim.id, l.diff_id);
      return std::unexpected(std::move(lock).error());
    }
    held.emplace(hex, std::move(*lock));
  }
  const fs::path record = root_ / "records" / (hex_of(victim.id) + ".json");
  fs::path used = record;
  used.replace_extension(".used");
  if (::unlink(record.c_str()) != 0 && errno != ENOENT)
    return sys_error(errno, "remove {}", record.string());
  ::unlink(used.c_str());
  EB_TRY(fsync_dir(root_ / "records"));
  for (auto& [hex, lock] : held)
    if (!others.count(hex)) EB_TRY(delete_layer(hex));
  return {};
}

// Temporaries nobody is writing: .tmp-<hex>-* whose unpack lock is free, and .del-*.
void store::collect_temporaries(const std::vector<fs::path>& entries, gc_report& report) {
  for (const auto& p : entries) {
    const std::string n = p.filename().string();
    if (n.starts_with(".tmp-")) {
      std::string hex = n.substr(5, 64);
      if (!is_sha256_hex(hex)) continue;
      auto lock = lock_file(root_ / "locks" / (hex + ".unpack"), LOCK_EX | LOCK_NB);
      if (!lock) continue;  // being written right now
      if (auto st = remove_layer_tree(p); !st) {
        report.errors.push_back(st.error().message);
      } else {
        ++report.temporaries_removed;
      }
    } else if (n.starts_with(".del-")) {
      if (auto st = remove_layer_tree(p); st) ++report.temporaries_removed;
    }
  }
}

// Layers no image names (an import holds its layers shared until its record is written, so a
// layer it is still adding cannot be taken here).
status store::collect_unnamed_layers(const std::vector<fs::path>& entries, gc_report& report) {
  auto referenced = [&]() -> result<std::set<std::string>> {
    std::set<std::string> out;
    for (const auto& i : EB_TRY(read_records()))
      for (const auto& l : i.layers) out.insert(hex_of(l.diff_id));
    return out;
  };
  std::set<std::string> names = EB_TRY(referenced());
  for (const auto& p : entries) {
    const std::string hex = p.filename().string();
    if (!is_sha256_hex(hex) || names.count(hex)) continue;
    auto lock = lock_file(root_ / "locks" / (hex + ".use"), LOCK_EX | LOCK_NB);
    if (!lock) continue;
    auto again = EB_TRY(referenced());  // a record written while we looked
    if (again.count(hex)) continue;
    uint64_t bytes = 0;
    if (auto l = read_layer("sha256:" + hex)) bytes = l->bytes;
    if (auto st = delete_layer(hex); !st) {
      report.errors.push_back(st.error().message);
    } else {
      ++report.layers_removed;
      report.bytes_freed += bytes;
    }
  }
  return {};
}

// Lock files of layers that do not exist (an import that crashed before publishing).
void store::collect_orphan_locks() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "locks", ec)) {
    const std::string n = e.path().filename().string();
    if (!n.ends_with(".use") || !is_sha256_hex(n.substr(0, n.size() - 4))) continue;
    const std::string hex = n.substr(0, 64);
    if (path_exists(root_ / "layers" / hex)) continue;
    auto lock = lock_file(root_ / "locks" / (hex + ".use"), LOCK_EX | LOCK_NB);
    if (!lock || path_exists(root_ / "layers" / hex)) continue;
    ::unlink((root_ / "locks" / (hex + ".unpack")).c_str());
    ::unlink((root_ / "locks" / (hex + ".use")).c_str());
  }
}

// Least recently used images until the store fits (never one a run holds); returns its size.
result<uint64_t> store::collect_least_recently_used(uint64_t max_bytes, gc_report& report) {
  auto count_layers = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root_ / "layers", ec))
      n += is_sha256_hex(e.path().filename().string()) ? 1 : 0;
    return n;
  };
  uint64_t total = EB_TRY(size());
  const int layers_before = count_layers();
  auto images = EB_TRY(list());
  std::reverse(images.begin(), images.end());  // least recently used first
  for (const auto& image : images) {
    if (total <= max_bytes) break;
    auto st = remove(image.id, {});
    if (!st) {
      if (st.error().kind == error_kind::busy) {
        ++report.images_in_use;
      } else {
        report.errors.push_back(st.error().message);
      }
      continue;
    }
    ++report.images_removed;
    uint64_t now = EB_TRY(size());
    report.bytes_freed += total - now;
    total = now;
  }
  report.layers_removed += layers_before - count_layers();
  return total;
}

result<gc_report> store::gc(std::optional<uint64_t> max_bytes) {
  gc_report report;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(root_ / "layers", ec)) entries.push_back(e.path());
  if (ec)
    return make_error(kind_from_errno(ec.value()), "list {}: {}", (root_ / "layers").string(),
                      ec.message());
  collect_temporaries(entries, report);
  EB_TRY(collect_unnamed_layers(entries, report));
  collect_orphan_locks();
  if (max_bytes)
    report.bytes_after = EB_TRY(collect_least_recently_used(*max_bytes, report));
  else
    report.bytes_after = EB_TRY(size());
  return report;
}

}  // namespace evalbox::sandbox::image
