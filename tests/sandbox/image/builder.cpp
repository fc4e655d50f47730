// Test image crafting (see builder.h).
#include "tests/sandbox/image/builder.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "base/digest.h"
#include "base/fs.h"
#include "base/json.h"
#include "sandbox/image/oci.h"

namespace evalbox::testing::image {

namespace fs = std::filesystem;

namespace {

struct writer {
  struct archive* a = archive_write_new();
  std::string out;
  ~writer() { archive_write_free(a); }
  static la_ssize_t write_cb(struct archive*, void* data, const void* buf, size_t n) {
    static_cast<writer*>(data)->out.append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  }
  void open() {
    archive_write_set_bytes_in_last_block(a, 1);
    if (archive_write_open(a, this, nullptr, write_cb, nullptr) != ARCHIVE_OK)
      throw std::runtime_error(archive_error_string(a));
  }
};

void check(struct archive* a, int rc) {
  if (rc < ARCHIVE_WARN) throw std::runtime_error(archive_error_string(a));
}

std::string compress(const std::string& data, int filter) {
  writer w;
  archive_write_set_format_raw(w.a);
  // The named filter functions, not archive_write_add_filter(code): that one would pull
  // every compressor of the static libarchive into the link.
  check(w.a, filter == ARCHIVE_FILTER_GZIP ? archive_write_add_filter_gzip(w.a)
                                           : archive_write_add_filter_zstd(w.a));
  w.open();
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_pathname(e, "data");
  check(w.a, archive_write_header(w.a, e));
  archive_entry_free(e);
  if (!data.empty()) archive_write_data(w.a, data.data(), data.size());
  check(w.a, archive_write_close(w.a));
  return w.out;
}

std::string host_arch() { return sandbox::image::host_platform().architecture; }

void write(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << data;
}

}  // namespace

std::string make_tar(const std::vector<tar_item>& items) {
  writer w;
  archive_write_set_format_pax_restricted(w.a);
  archive_write_add_filter_none(w.a);
  w.open();
  for (const auto& it : items) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, it.path.c_str());
    archive_entry_set_mtime(e, it.mtime, 0);
    archive_entry_set_uid(e, 1234);
    archive_entry_set_gid(e, 5678);
    size_t size = 0;
    switch (it.type) {
      case 'f':
        archive_entry_set_filetype(e, AE_IFREG);
        size = it.content.size();
        break;
      case 'd':
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
      case 'l':
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, it.link.c_str());
        break;
      case 'h':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, it.link.c_str());
        break;
      case 'p':
        archive_entry_set_filetype(e, AE_IFIFO);
        break;
      case 'c':
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdevmajor(e, it.dev_major);
        archive_entry_set_rdevminor(e, it.dev_minor);
        break;
      case 'b':
        archive_entry_set_filetype(e, AE_IFBLK);
        archive_entry_set_rdevmajor(e, it.dev_major);
        archive_entry_set_rdevminor(e, it.dev_minor);
        break;
      default:
        throw std::runtime_error("unknown tar item type");
    }
    archive_entry_set_perm(e, it.mode);
    archive_entry_set_size(e, static_cast<la_int64_t>(size));
    for (const auto& [name, value] : it.xattrs)
      archive_entry_xattr_add_entry(e, name.c_str(), value.data(), value.size());
    check(w.a, archive_write_header(w.a, e));
    if (size) archive_write_data(w.a, it.content.data(), size);
    archive_entry_free(e);
  }
  check(w.a, archive_write_close(w.a));
  return w.out;
}

std::string gzip(const std::string& data) { return compress(data, ARCHIVE_FILTER_GZIP); }
std::string zstd(const std::string& data) { return compress(data, ARCHIVE_FILTER_ZSTD); }
std::string sha256_digest(const std::string& data) { return "sha256:" + sha256_hex(data); }

layer make_layer(const std::vector<tar_item>& items, const std::string& compression) {
  layer l;
  l.tar = make_tar(items);
  if (compression == "gzip") {
    l.blob = gzip(l.tar);
    l.media_type = "application/vnd.oci.image.layer.v1.tar+gzip";
  } else if (compression == "zstd") {
    l.blob = zstd(l.tar);
    l.media_type = "application/vnd.oci.image.layer.v1.tar+zstd";
  } else {
    l.blob = l.tar;
    l.media_type = "application/vnd.oci.image.layer.v1.tar";
  }
  return l;
}

layout_digests write_oci_layout(const fs::path& dir, const std::vector<layer>& layers,
                                const layout_options& o) {
  fs::create_directories(dir / "blobs" / "sha256");
  auto put = [&](const std::string& data) {
    std::string d = sha256_digest(data);
    write(dir / "blobs" / "sha256" / d.substr(7), data);
    return d;
  };
  layout_digests out;
  json diff_ids = json::array();
  json descs = json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    std::string diff = sha256_digest(layers[i].tar);
    for (const auto& [idx, v] : o.diff_id_override)
      if (idx == i) diff = v;
    out.diff_ids.push_back(diff);
    diff_ids.push_back(diff);
    std::string digest = sha256_digest(layers[i].blob);
    descs.push_back(
        {{"mediaType", layers[i].media_type}, {"digest", digest}, {"size", layers[i].blob.size()}});
    if (o.omit_layer_blobs) continue;
    std::string stored = layers[i].blob;
    for (const auto& [idx, v] : o.stored_blob_override)
      if (idx == i) stored = v;
    write(dir / "blobs" / "sha256" / digest.substr(7), stored);
  }
  json config{{"architecture", o.architecture.empty() ? host_arch() : o.architecture},
              {"os", "linux"},
              {"config", {{"Env", {"PATH=/bin"}}, {"Cmd", {"/bin/sh"}}, {"WorkingDir", "/"}}},
              {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  std::string config_text = config.dump();
  out.config = put(config_text);
  json manifest{{"schemaVersion", 2},
                {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                {"config",
                 {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                  {"digest", out.config},
                  {"size", config_text.size()}}},
                {"layers", descs}};
  std::string manifest_text = o.raw_manifest.empty() ? manifest.dump() : o.raw_manifest;
  out.manifest = sha256_digest(manifest_text);
  if (!o.omit_manifest_blob) put(manifest_text);
  json entry{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
             {"digest", out.manifest},
             {"size", manifest_text.size()},
             {"annotations", {{"org.opencontainers.image.ref.name", o.tag}}}};
  if (!o.index_platform_arch.empty())
    entry["platform"] = {{"architecture", o.index_platform_arch}, {"os", "linux"}};
  json index{{"schemaVersion", 2},
             {"mediaType", "application/vnd.oci.image.index.v1+json"},
             {"manifests", {entry}}};
  write(dir / "index.json", o.raw_index.empty() ? index.dump() : o.raw_index);
  write(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  return out;
}

namespace {
void add_member(writer& w, const std::string& name, const std::string& data) {
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  check(w.a, archive_write_header(w.a, e));
  archive_write_data(w.a, data.data(), data.size());
  archive_entry_free(e);
}
}  // namespace

void write_tar_of_dir(const fs::path& dir, const fs::path& tar) {
  writer w;
  archive_write_set_format_pax_restricted(w.a);
  w.open();
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto data = read_file(f, 1u << 30);
    add_member(w, f.lexically_relative(dir).string(), *data);
  }
  check(w.a, archive_write_close(w.a));
  write(tar, w.out);
}

void write_docker_archive(const fs::path& tar, const std::vector<layer>& layers,
                          const std::string& repo_tag) {
  writer w;
  archive_write_set_format_pax_restricted(w.a);
  w.open();
  json diff_ids = json::array();
  json paths = json::array();
  for (const auto& l : layers) {
    std::string d = sha256_digest(l.tar);
    diff_ids.push_back(d);
    std::string name = sha256_hex(l.blob) + ".tar";
    paths.push_back(name);
    add_member(w, name, l.blob);
  }
  json config{{"architecture", host_arch()},
              {"os", "linux"},
              {"config", {{"Env", {"PATH=/bin"}}}},
              {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  std::string config_text = config.dump();
  std::string config_name = sha256_hex(config_text) + ".json";
  add_member(w, config_name, config_text);
  json manifest =
      json::array({{{"Config", config_name}, {"RepoTags", {repo_tag}}, {"Layers", paths}}});
  add_member(w, "manifest.json", manifest.dump());
  check(w.a, archive_write_close(w.a));
  write(tar, w.out);
}

std::string snapshot(const fs::path& root) {
  std::vector<std::string> lines;
  std::error_code ec;
  if (!fs::exists(root, ec)) return "<missing>";
  for (auto it = fs::recursive_directory_iterator(root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    std::string line =
        fmt::format("{} {:o} {} {}:{} {}", it->path().lexically_relative(root).string(),
                    static_cast<unsigned>(st.st_mode), st.st_nlink, st.st_uid, st.st_gid,
                    S_ISDIR(st.st_mode) ? 0 : st.st_size);
    if (S_ISREG(st.st_mode)) line += " " + sha256_file(it->path()).value_or("?");
    lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace evalbox::testing::image
