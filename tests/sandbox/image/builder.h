// Crafting images for the image store's tests: tar layers written with libarchive's write API
// (so hostile entries — "..", absolute paths, devices, links out — are exactly what a hostile
// image would carry), compressed with gzip or zstd, assembled into OCI layouts, oci-archives
// and docker-archives with digests computed over whatever bytes the test chose.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace evalbox::testing::image {

struct tar_item {
  std::string path;
  char type = 'f';  // f file, d dir, l symlink, h hard link, p fifo, c char dev, b block dev
  std::string content;
  std::string link;  // symlink text / hard link target
  mode_t mode = 0644;
  unsigned dev_major = 0;
  unsigned dev_minor = 0;
  std::vector<std::pair<std::string, std::string>> xattrs;
  long long mtime = 1700000000;
};

inline tar_item file(std::string path, std::string content, mode_t mode = 0644) {
  return {std::move(path), 'f', std::move(content), "", mode};
}
inline tar_item dir(std::string path, mode_t mode = 0755) {
  return {std::move(path), 'd', "", "", mode};
}
inline tar_item symlink(std::string path, std::string target) {
  return {std::move(path), 'l', "", std::move(target), 0777};
}
inline tar_item hardlink(std::string path, std::string target) {
  return {std::move(path), 'h', "", std::move(target), 0644};
}

// An uncompressed pax tar of `items`, in order.
std::string make_tar(const std::vector<tar_item>& items);
std::string gzip(const std::string& data);
std::string zstd(const std::string& data);
std::string sha256_digest(const std::string& data);  // "sha256:<hex>"

struct layer {
  std::string tar;   // uncompressed: its digest is the diff_id
  std::string blob;  // as stored
  std::string media_type;
};
// compression: "none", "gzip", "zstd".
layer make_layer(const std::vector<tar_item>& items, const std::string& compression = "gzip");

struct layout_options {
  std::string tag = "latest";
  std::string architecture;         // default: the host's
  std::string index_platform_arch;  // non-empty: a platform on the index entry
  // Overrides, to craft mismatches: replace the i-th diff_id in the config / the i-th blob
  // stored (its descriptor keeps the digest of the original).
  std::vector<std::pair<size_t, std::string>> diff_id_override;
  std::vector<std::pair<size_t, std::string>> stored_blob_override;
  std::string raw_index;     // non-empty: written as index.json instead
  std::string raw_manifest;  // non-empty: the manifest blob's content (digest matches it)
  bool omit_layer_blobs = false;
  bool omit_manifest_blob = false;
};

struct layout_digests {
  std::string manifest;
  std::string config;
  std::vector<std::string> diff_ids;
};

// Writes an OCI layout at `dir` (created).
layout_digests write_oci_layout(const std::filesystem::path& dir, const std::vector<layer>& layers,
                                const layout_options& options = {});
// A tar of an existing directory's content (oci-archive of a layout).
void write_tar_of_dir(const std::filesystem::path& dir, const std::filesystem::path& tar);
// A docker save: manifest.json written AFTER the layers (as docker does), layers as
// <hex>.tar, config as <hex>.json, tagged `repo_tag`.
void write_docker_archive(const std::filesystem::path& tar, const std::vector<layer>& layers,
                          const std::string& repo_tag);

// A listing of every entry below `root` (path, type, mode, size, content digest for files),
// for "nothing changed" assertions.
std::string snapshot(const std::filesystem::path& root);

}  // namespace evalbox::testing::image
