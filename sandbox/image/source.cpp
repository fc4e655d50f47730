// Image sources: OCI layout directories, tars holding an OCI layout or a docker save, and root
// filesystem directories (see source.h).
#include "sandbox/image/source.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/digest.h"
#include "base/fs.h"
#include "sandbox/sys/beneath.h"

namespace evalbox::sandbox::image {

namespace fs = std::filesystem;

namespace {

struct archive_deleter {
  void operator()(struct archive* a) const noexcept { archive_read_free(a); }
};
using archive_ptr = std::unique_ptr<struct archive, archive_deleter>;

// Where the files of an image live.
class container {
 public:
  virtual ~container() = default;
  // A whole member, at most `max` bytes.
  virtual result<std::string> read_file(const std::string& rel, size_t max) = 0;
  // Size of a member (after following links inside a tar), or not_found.
  virtual result<int64_t> size_of(const std::string& rel) = 0;
  using stream_fn = std::function<status(const std::string& rel, byte_source& data)>;
  // Streams the members `rels`, each once, in whatever order is cheapest.
  virtual status stream(const std::set<std::string>& rels, const stream_fn& fn) = 0;
};

// ---- a directory (oci:DIR) ----

class dir_container final : public container {
 public:
  explicit dir_container(unique_fd dir) : dir_(std::move(dir)) {}

  result<unique_fd> open_member(const std::string& rel) {
    // O_NONBLOCK: a fifo planted as a blob must not hang the import (it is refused below).
    unique_fd fd(sys::open_beneath(dir_.get(), rel.c_str(),
                                   O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
                                   RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS));
    if (!fd) return sys_error(errno, "open {}", rel);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return sys_error(errno, "stat {}", rel);
    if (!S_ISREG(st.st_mode))
      return make_error(error_kind::invalid_argument, "{} is not a regular file", rel);
    int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
      return sys_error(errno, "fcntl {}", rel);
    return fd;
  }

  result<std::string> read_file(const std::string& rel, size_t max) override {
    unique_fd fd = EB_TRY(open_member(rel));
    return read_fd(fd.get(), max, rel);
  }

  result<int64_t> size_of(const std::string& rel) override {
    unique_fd fd = EB_TRY(open_member(rel));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return sys_error(errno, "stat {}", rel);
    return static_cast<int64_t>(st.st_size);
  }

  status stream(const std::set<std::string>& rels, const stream_fn& fn) override {
    for (const auto& rel : rels) {
      unique_fd fd = EB_TRY(open_member(rel));
      fd_source src(std::move(fd));
      EB_TRY(fn(rel, src));
    }
    return {};
  }

 private:
  unique_fd dir_;
};

// ---- a tar (oci-archive:, docker-archive:) ----

// The current member of an outer archive, as a byte_source.
class member_source final : public byte_source {
 public:
  explicit member_source(struct archive* a) : a_(a) {}
  result<size_t> read(std::span<std::byte> buf) override {
    la_ssize_t n = archive_read_data(a_, buf.data(), buf.size());
    if (n < 0) {
      const char* msg = archive_error_string(a_);
      return make_error(error_kind::invalid_argument, "read archive member: {}",
                        msg ? msg : "unknown error");
    }
    return static_cast<size_t>(n);
  }

 private:
  struct archive* a_;
};

// Archive member names are compared normalized: no "./" prefix, no empty or "." components.
std::string clean_name(std::string_view name) {
  std::string out;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t slash = name.find('/', pos);
    std::string_view comp =
        name.substr(pos, slash == std::string_view::npos ? name.npos : slash - pos);
    if (!comp.empty() && comp != ".") {
      if (!out.empty()) out += '/';
      out += comp;
    }
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  return out;
}

class tar_container final : public container {
 public:
  explicit tar_container(fs::path file) : file_(std::move(file)) {}

  result<archive_ptr> open_pass() {
    archive_ptr a(archive_read_new());
    if (!a) return make_error(error_kind::internal, "archive_read_new failed");
    archive_read_support_format_tar(a.get());
    if (archive_read_support_filter_gzip(a.get()) != ARCHIVE_OK ||
        archive_read_support_filter_zstd(a.get()) != ARCHIVE_OK)
      return make_error(error_kind::unsupported, "libarchive lacks gzip or zstd support");
    if (archive_read_open_filename(a.get(), file_.c_str(), 64u << 10) != ARCHIVE_OK)
      return make_error(
          error_kind::invalid_argument, "{}: {}", file_.string(),
          archive_error_string(a.get()) ? archive_error_string(a.get()) : "cannot open");
    return a;
  }

  struct member {
    bool regular = false;
    std::string link;  // symlink text or hard link target (normalized name)
    bool hardlink = false;
    int64_t size = 0;
  };

  // One header-only pass (data is skipped with lseek on a plain tar) listing every member.
  status scan() {
    if (scanned_) return {};
    archive_ptr a = EB_TRY(open_pass());
    struct archive_entry* e = nullptr;
    size_t count = 0;
    while (true) {
      int rc = archive_read_next_header(a.get(), &e);
      if (rc == ARCHIVE_EOF) break;
      if (rc < ARCHIVE_WARN)
        return make_error(
            error_kind::invalid_argument, "{}: {}", file_.string(),
            archive_error_string(a.get()) ? archive_error_string(a.get()) : "corrupt archive");
      if (++count > 1'000'000)
        return make_error(error_kind::invalid_argument, "{}: more than a million members",
                          file_.string());
      const char* name = archive_entry_pathname(e);
      if (!name) continue;
      member m;
      if (const char* h = archive_entry_hardlink(e)) {
        m.hardlink = true;
        m.link = clean_name(h);
      } else if (archive_entry_filetype(e) == AE_IFLNK && archive_entry_symlink(e)) {
        m.link = archive_entry_symlink(e);
      } else {
        m.regular = archive_entry_filetype(e) == AE_IFREG;
        m.size = archive_entry_size(e);
      }
      members_[clean_name(name)] = std::move(m);
    }
    scanned_ = true;
    return {};
  }

  // Follows symlinks and hard links inside the archive (never outside it, at most 8 hops) to
  // the member holding the data.
  result<std::string> resolve(const std::string& rel) {
    EB_TRY(scan());
    std::string cur = clean_name(rel);
    for (int hop = 0; hop < 8; ++hop) {
      auto it = members_.find(cur);
      if (it == members_.end())
        return make_error(error_kind::not_found, "{} is not in {}", rel, file_.string());
      const member& m = it->second;
      if (m.regular) return cur;
      if (m.link.empty())
        return make_error(error_kind::invalid_argument, "{} in {} is not a regular file", rel,
                          file_.string());
      if (m.hardlink) {
        cur = m.link;
        continue;
      }
      if (m.link.starts_with('/'))
        return make_error(error_kind::invalid_argument,
                          "{} in {} is an absolute symlink (only links within the archive are "
                          "followed)",
                          rel, file_.string());
      fs::path target = (fs::path(cur).parent_path() / m.link).lexically_normal();
      std::string t = target.string();
      if (t.starts_with("..") || t.empty())
        return make_error(error_kind::invalid_argument, "{} in {} links outside the archive", rel,
                          file_.string());
      cur = clean_name(t);
    }
    return make_error(error_kind::invalid_argument, "{} in {}: too many links", rel,
                      file_.string());
  }

  result<int64_t> size_of(const std::string& rel) override {
    std::string name = EB_TRY(resolve(rel));
    return members_[name].size;
  }

  result<std::string> read_file(const std::string& rel, size_t max) override {
    std::string name = EB_TRY(resolve(rel));
    if (members_[name].size > static_cast<int64_t>(max))
      return make_error(error_kind::invalid_argument, "{} is larger than {} bytes", rel, max);
    std::string out;
    bool found = false;
    status streamed = stream({name}, [&](const std::string&, byte_source& src) -> status {
      found = true;
      std::vector<std::byte> buf(64u << 10);
      while (true) {
        size_t n = EB_TRY(src.read(buf));
        if (n == 0) break;
        if (out.size() + n > max)
          return make_error(error_kind::invalid_argument, "{} is larger than {} bytes", rel, max);
        out.append(reinterpret_cast<const char*>(buf.data()), n);
      }
      return {};
    });
    if (!streamed) return std::unexpected(std::move(streamed).error());
    if (!found) return make_error(error_kind::not_found, "{} is not in {}", rel, file_.string());
    return out;
  }

  status stream(const std::set<std::string>& rels, const stream_fn& fn) override {
    std::set<std::string> want;
    for (const auto& r : rels) want.insert(EB_TRY(resolve(r)));
    archive_ptr a = EB_TRY(open_pass());
    struct archive_entry* e = nullptr;
    while (!want.empty()) {
      int rc = archive_read_next_header(a.get(), &e);
      if (rc == ARCHIVE_EOF) break;
      if (rc < ARCHIVE_WARN)
        return make_error(
            error_kind::invalid_argument, "{}: {}", file_.string(),
            archive_error_string(a.get()) ? archive_error_string(a.get()) : "corrupt archive");
      const char* name = archive_entry_pathname(e);
      if (!name || archive_entry_hardlink(e) || archive_entry_filetype(e) != AE_IFREG) continue;
      auto it = want.find(clean_name(name));
      if (it == want.end()) continue;
      std::string rel = *it;
      want.erase(it);
      member_source src(a.get());
      EB_TRY(fn(rel, src));
    }
    if (!want.empty())
      return make_error(error_kind::not_found, "{} is not in {}", *want.begin(), file_.string());
    return {};
  }

 private:
  fs::path file_;
  bool scanned_ = false;
  std::map<std::string, member> members_;
};

// ---- verification helpers ----

result<std::string> read_blob(container& c, const descriptor& d, size_t max,
                              std::string_view what) {
  std::string hex = EB_TRY(digest_hex(d.digest, what));
  std::string rel = "blobs/sha256/" + hex;
  if (d.size > static_cast<int64_t>(max))
    return make_error(error_kind::invalid_argument, "{} {}: {} bytes, more than the {} allowed",
                      what, d.digest, d.size, max);
  auto text = c.read_file(rel, max);
  if (!text) {
    if (text.error().kind == error_kind::not_found)
      return make_error(error_kind::not_found, "{} {}: blob {} is missing", what, d.digest, rel);
    return std::unexpected(
        std::move(text).error().with_context(fmt::format("{} {}", what, d.digest)));
  }
  if (d.size >= 0 && static_cast<int64_t>(text->size()) != d.size)
    return make_error(error_kind::invalid_argument, "{} {}: blob is {} bytes, descriptor says {}",
                      what, d.digest, text->size(), d.size);
  if ("sha256:" + sha256_hex(*text) != d.digest)
    return make_error(error_kind::invalid_argument, "{} {}: blob content does not match its digest",
                      what, d.digest);
  return text;
}

status check_platform(const image_config& config, const std::string& image) {
  platform host = host_platform();
  platform got{config.os, config.architecture, config.variant};
  if (!platform_matches(got, host))
    return make_error(error_kind::unsupported,
                      "image {}: built for {}; this host is {} (import the image built for this "
                      "host's platform)",
                      image, got.str(), host.str());
  return {};
}

// ---- OCI layouts (oci:, oci-archive:) ----

class oci_source final : public image_source {
 public:
  oci_source(reference ref, std::unique_ptr<container> c)
      : ref_(std::move(ref)), c_(std::move(c)) {}

  result<resolved_image> resolve() override {
    const std::string name = ref_.str();
    auto layout = c_->read_file("oci-layout", 4096);
    if (!layout)
      return make_error(error_kind::invalid_argument,
                        "image {}: not an OCI image layout (no readable oci-layout file: {})", name,
                        layout.error().message);
    auto index_text = c_->read_file("index.json", max_json_bytes);
    if (!index_text)
      return std::unexpected(
          std::move(index_text).error().with_context(fmt::format("image {}: index.json", name)));
    index_doc index = EB_TRY(parse_index(*index_text, fmt::format("image {}: index.json", name)));
    const platform host = host_platform();
    descriptor chosen = EB_TRY(select_manifest(index, ref_.tag, host, name));
    for (int depth = 0; classify_media_type(chosen.media_type) == media_kind::index; ++depth) {
      if (depth >= max_index_depth)
        return make_error(error_kind::invalid_argument, "image {}: indexes nested deeper than {}",
                          name, max_index_depth);
      std::string what = fmt::format("image {}: index", name);
      std::string text = EB_TRY(read_blob(*c_, chosen, max_json_bytes, what));
      index_doc nested = EB_TRY(parse_index(text, fmt::format("{} {}", what, chosen.digest)));
      chosen = EB_TRY(select_manifest(nested, "", host, name));
    }
    resolved_image out;
    out.ref = ref_;
    out.manifest_digest = chosen.digest;
    std::string what = fmt::format("image {}: manifest", name);
    std::string manifest_text = EB_TRY(read_blob(*c_, chosen, max_json_bytes, what));
    manifest_doc manifest =
        EB_TRY(parse_manifest(manifest_text, fmt::format("{} {}", what, chosen.digest)));
    std::string config_what = fmt::format("image {}: config", name);
    std::string config_text = EB_TRY(read_blob(*c_, manifest.config, max_json_bytes, config_what));
    out.config = EB_TRY(
        parse_config(config_text, fmt::format("{} {}", config_what, manifest.config.digest)));
    out.config_digest = manifest.config.digest;
    EB_TRY(check_platform(out.config, name));
    out.layers = EB_TRY(layers_of(manifest, out.config, "blobs/sha256/", name));
    return out;
  }

  status for_each_layer(const resolved_image& image, const std::vector<size_t>& wanted,
                        const layer_fn& fn) override {
    return stream_layers(*c_, image, wanted, fn);
  }

  static status stream_layers(container& c, const resolved_image& image,
                              const std::vector<size_t>& wanted, const layer_fn& fn) {
    std::map<std::string, size_t> by_location;
    std::set<std::string> rels;
    for (size_t i : wanted) {
      const auto& l = image.layers.at(i);
      auto [it, fresh] = by_location.emplace(l.location, i);
      if (!fresh && image.layers[it->second].diff_id != l.diff_id)
        return make_error(error_kind::invalid_argument,
                          "image {}: layers {} and {} are the same blob with different diff_ids",
                          image.ref.str(), it->second + 1, i + 1);
      rels.insert(l.location);
    }
    // Errors of the caller's fn already say which image and layer; the container's own (a
    // missing or unreadable blob) get that context here.
    bool from_fn = false;
    status st = c.stream(rels, [&](const std::string& rel, byte_source& src) -> status {
      auto it = by_location.find(rel);
      if (it == by_location.end()) return {};
      status r = fn(it->second, src);
      from_fn = !r;
      return r;
    });
    if (!st && !from_fn)
      return std::unexpected(
          std::move(st).error().with_context(fmt::format("image {}: layer blob", image.ref.str())));
    return st;
  }

 private:
  reference ref_;
  std::unique_ptr<container> c_;
};

// ---- docker save (docker-archive:) ----

// "blobs/sha256/<hex>" (Docker 25+) or "<hex>.tar" / "<hex>.json" (podman, older Docker):
// names that are the digest of their content, checked as such.
std::string digest_named(const std::string& rel) {
  std::string base = rel;
  if (base.starts_with("blobs/sha256/"))
    base = base.substr(13);
  else if (base.ends_with(".tar") || base.ends_with(".json"))
    base = base.substr(0, base.rfind('.'));
  return is_sha256_hex(base) ? "sha256:" + base : std::string();
}

class docker_source final : public image_source {
 public:
  docker_source(reference ref, std::unique_ptr<tar_container> c)
      : ref_(std::move(ref)), c_(std::move(c)) {}

  result<resolved_image> resolve() override {
    const std::string name = ref_.str();
    auto text = c_->read_file("manifest.json", max_json_bytes);
    if (!text) {
      if (text.error().kind == error_kind::not_found)
        return make_error(error_kind::invalid_argument,
                          "image {}: no manifest.json (not a docker save; an OCI layout in a tar "
                          "is oci-archive:)",
                          name);
      return std::unexpected(
          std::move(text).error().with_context(fmt::format("image {}: manifest.json", name)));
    }
    auto entries =
        EB_TRY(parse_docker_manifest(*text, fmt::format("image {}: manifest.json", name)));
    const docker_manifest_entry* chosen = nullptr;
    std::vector<std::string> tags;
    for (const auto& e : entries) {
      for (const auto& t : e.repo_tags) {
        tags.push_back(t);
        if (!ref_.tag.empty() && t == ref_.tag) chosen = &e;
      }
    }
    if (!ref_.tag.empty() && !chosen)
      return make_error(
          error_kind::not_found, "image {}: no image tagged '{}' (tags: {})", name, ref_.tag,
          tags.empty() ? std::string("none") : fmt::format("{}", fmt::join(tags, ", ")));
    if (!chosen) {
      if (entries.size() > 1)
        return make_error(error_kind::invalid_argument,
                          "image {}: holds {} images; name one as docker-archive:FILE:NAME:TAG "
                          "(tags: {})",
                          name, entries.size(), fmt::join(tags, ", "));
      chosen = &entries.front();
    }
    resolved_image out;
    out.ref = ref_;
    std::string config_text = EB_TRY_CTX(c_->read_file(chosen->config, max_json_bytes),
                                         fmt::format("image {}: config", name));
    out.config_digest = "sha256:" + sha256_hex(config_text);
    if (auto named = digest_named(chosen->config); !named.empty() && named != out.config_digest)
      return make_error(error_kind::invalid_argument,
                        "image {}: config {} does not match the digest its name says", name,
                        chosen->config);
    out.config = EB_TRY(parse_config(config_text, fmt::format("image {}: config", name)));
    EB_TRY(check_platform(out.config, name));
    if (out.config.diff_ids.size() != chosen->layers.size())
      return make_error(error_kind::invalid_argument,
                        "image {}: manifest.json lists {} layers, the config {} diff_ids", name,
                        chosen->layers.size(), out.config.diff_ids.size());
    for (size_t i = 0; i < chosen->layers.size(); ++i) {
      layer_ref l;
      l.diff_id = out.config.diff_ids[i];
      l.location = EB_TRY_CTX(c_->resolve(chosen->layers[i]),
                              fmt::format("image {}: layer {}", name, i + 1));
      l.digest = digest_named(l.location);
      l.size = EB_TRY(c_->size_of(l.location));
      out.layers.push_back(std::move(l));
    }
    return out;
  }

  status for_each_layer(const resolved_image& image, const std::vector<size_t>& wanted,
                        const layer_fn& fn) override {
    return oci_source::stream_layers(*c_, image, wanted, fn);
  }

 private:
  reference ref_;
  std::unique_ptr<tar_container> c_;
};

// ---- rootfs: ----

class rootfs_source final : public image_source {
 public:
  explicit rootfs_source(reference ref) : ref_(std::move(ref)) {}
  result<resolved_image> resolve() override {
    resolved_image out;
    out.ref = ref_;
    platform host = host_platform();
    out.config.os = host.os;
    out.config.architecture = host.architecture;
    out.config.variant = host.variant;
    out.config.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
    std::string key = EB_TRY_CTX(rootfs_digest(ref_.path), fmt::format("image {}", ref_.str()));
    out.config.diff_ids = {key};
    // The id: a digest of the synthesized config, as for any other image.
    out.config_digest = "sha256:" + sha256_hex(canonical_json(out.config.to_json()));
    layer_ref l;
    l.diff_id = key;
    l.location = ref_.path.string();
    out.layers.push_back(std::move(l));
    return out;
  }
  status for_each_layer(const resolved_image&, const std::vector<size_t>&,
                        const layer_fn&) override {
    return make_error(error_kind::internal, "rootfs images are copied, not streamed");
  }

 private:
  reference ref_;
};

// Walks `dir` without following symlinks, in sorted order, calling fn(rel, stat).
status walk(const fs::path& dir,
            const std::function<status(const std::string&, const struct stat&)>& fn) {
  std::error_code ec;
  std::vector<std::string> rels;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) return make_error(kind_from_errno(ec.value()), "walk {}: {}", dir.string(), ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec)
      return make_error(kind_from_errno(ec.value()), "walk {}: {}", dir.string(), ec.message());
    rels.push_back(it->path().lexically_relative(dir).string());
  }
  std::sort(rels.begin(), rels.end());
  for (const auto& rel : rels) {
    struct stat st {};
    if (::lstat((dir / rel).c_str(), &st) != 0) return sys_error(errno, "lstat {}", rel);
    EB_TRY(fn(rel, st));
  }
  return {};
}

}  // namespace

result<std::vector<layer_ref>> layers_of(const manifest_doc& manifest, const image_config& config,
                                         std::string_view location_prefix, std::string_view image) {
  if (config.diff_ids.size() != manifest.layers.size())
    return make_error(error_kind::invalid_argument,
                      "image {}: the manifest lists {} layers, the config {} diff_ids", image,
                      manifest.layers.size(), config.diff_ids.size());
  std::vector<layer_ref> out;
  for (size_t i = 0; i < manifest.layers.size(); ++i) {
    const auto& d = manifest.layers[i];
    layer_ref l;
    l.diff_id = config.diff_ids[i];
    l.digest = d.digest;
    l.size = d.size;
    l.media_type = d.media_type;
    l.location = std::string(location_prefix) +
                 EB_TRY(digest_hex(d.digest, fmt::format("image {}: manifest", image)));
    out.push_back(std::move(l));
  }
  return out;
}

result<std::unique_ptr<image_source>> image_source::open(const reference& ref,
                                                         const registry_settings* registry) {
  if (ref.kind == transport::docker) {
    if (!registry)
      return make_error(error_kind::internal, "image {}: no registry settings to pull with",
                        ref.str());
    return make_registry_source(ref, *registry);
  }
  struct stat st {};
  if (::stat(ref.path.c_str(), &st) != 0)
    return sys_error(errno, "image {}: {}", ref.str(), ref.path.string());
  const bool want_dir = ref.kind == transport::oci || ref.kind == transport::rootfs;
  if (want_dir && !S_ISDIR(st.st_mode))
    return make_error(error_kind::invalid_argument, "image {}: {} is not a directory", ref.str(),
                      ref.path.string());
  if (!want_dir && !S_ISREG(st.st_mode))
    return make_error(error_kind::invalid_argument, "image {}: {} is not a regular file", ref.str(),
                      ref.path.string());
  switch (ref.kind) {
    case transport::oci: {
      unique_fd dir(::open(ref.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!dir) return sys_error(errno, "image {}: open {}", ref.str(), ref.path.string());
      return std::make_unique<oci_source>(ref, std::make_unique<dir_container>(std::move(dir)));
    }
    case transport::oci_archive:
      return std::make_unique<oci_source>(ref, std::make_unique<tar_container>(ref.path));
    case transport::docker_archive:
      return std::make_unique<docker_source>(ref, std::make_unique<tar_container>(ref.path));
    case transport::rootfs:
      return std::make_unique<rootfs_source>(ref);
    case transport::docker:
      break;
  }
  return make_error(error_kind::internal, "unknown transport");
}

result<std::string> rootfs_digest(const fs::path& dir) {
  sha256 h;
  EB_TRY(walk(dir, [&](const std::string& rel, const struct stat& st) -> status {
    std::string link;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      link = fs::read_symlink(dir / rel, ec).string();
    }
    // Length-prefixed, so no two listings hash the same text.
    h.update(fmt::format("{} {} {:o} {} {}.{} {} {}\n", rel.size(), rel,
                         static_cast<unsigned>(st.st_mode), st.st_size, st.st_mtim.tv_sec,
                         st.st_mtim.tv_nsec, link.size(), link));
    return {};
  }));
  return "sha256:" + h.hex_digest();
}

status copy_rootfs(const fs::path& dir, tree_writer& out, const std::atomic<bool>* cancel) {
  std::vector<std::byte> buf(256u << 10);
  EB_TRY(walk(dir, [&](const std::string& rel, const struct stat& st) -> status {
    if (cancel && cancel->load()) return make_error(error_kind::cancelled, "cancelled");
    tree_entry e;
    e.path = rel;
    e.mode = st.st_mode & 07777;
    e.mtime = st.st_mtim;
    unique_fd fd;
    if (S_ISREG(st.st_mode)) {
      e.type = entry_type::regular;
      e.size = st.st_size;
      fd.reset(::open((dir / rel).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return sys_error(errno, "open {}", (dir / rel).string());
    } else if (S_ISDIR(st.st_mode)) {
      e.type = entry_type::directory;
    } else if (S_ISLNK(st.st_mode)) {
      e.type = entry_type::symlink;
      std::error_code ec;
      e.link = fs::read_symlink(dir / rel, ec).string();
      if (ec) return make_error(kind_from_errno(ec.value()), "readlink {}", rel);
    } else if (S_ISFIFO(st.st_mode)) {
      e.type = entry_type::fifo;
    } else if (S_ISCHR(st.st_mode)) {
      e.type = entry_type::char_device;
      e.dev_major = major(st.st_rdev);
      e.dev_minor = minor(st.st_rdev);
    } else if (S_ISBLK(st.st_mode)) {
      e.type = entry_type::block_device;
    } else {
      e.type = entry_type::socket;
    }
    int64_t offset = 0;
    return out.add(e, [&]() -> result<std::optional<content_block>> {
      if (!fd) return std::optional<content_block>();
      ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n < 0) return sys_error(errno, "read {}", rel);
      if (n == 0) return std::optional<content_block>();
      content_block b{buf.data(), static_cast<size_t>(n), offset};
      offset += n;
      return std::optional<content_block>(b);
    });
  }));
  return out.end_layer();
}

}  // namespace evalbox::sandbox::image
