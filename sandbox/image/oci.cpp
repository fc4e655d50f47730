// OCI/Docker image JSON documents (see oci.h).
#include "sandbox/image/oci.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <vector>

#include "base/digest.h"
#include "base/json_get.h"

namespace evalbox::sandbox::image {

namespace {

constexpr std::string_view ref_name_annotation = "org.opencontainers.image.ref.name";

result<json> parse_bounded(std::string_view text, std::string_view what) {
  if (text.size() > max_json_bytes)
    return make_error(error_kind::invalid_argument, "{}: larger than {} bytes", what,
                      max_json_bytes);
  return parse_json(text, what);
}

// An object or array field, as a pointer (null when it is missing or null and not required).
result<const json*> field(const json& obj, std::string_view key, json::value_t type, bool required,
                          std::string_view what) {
  const json& v = json_member(obj, key);
  if (v.is_null()) {
    if (required) return make_error(error_kind::invalid_argument, "{}: '{}' is missing", what, key);
    return static_cast<const json*>(nullptr);
  }
  bool ok = v.type() == type ||
            (type == json::value_t::number_integer && v.type() == json::value_t::number_unsigned);
  if (!ok)
    return make_error(error_kind::invalid_argument, "{}: '{}' has the wrong type ({})", what, key,
                      v.type_name());
  return &v;
}

result<std::string> string_field(const json& obj, std::string_view key, bool required,
                                 std::string_view what) {
  if (required) return EB_TRY_CTX(json_get<std::string>(obj, key), what);
  return EB_TRY_CTX(json_get_optional<std::string>(obj, key), what).value_or("");
}

result<std::vector<std::string>> strings_field(const json& obj, std::string_view key,
                                               std::string_view what) {
  return EB_TRY_CTX(json_get_optional<std::vector<std::string>>(obj, key), what)
      .value_or(std::vector<std::string>());
}

result<const json*> object_of(const json& doc, std::string_view what) {
  if (!doc.is_object())
    return make_error(error_kind::invalid_argument, "{}: not a JSON object", what);
  return &doc;
}

result<platform> parse_platform(const json& j, std::string_view what) {
  if (!j.is_object())
    return make_error(error_kind::invalid_argument, "{}: 'platform' is not an object", what);
  platform p;
  p.os = EB_TRY(string_field(j, "os", true, what));
  p.architecture = EB_TRY(string_field(j, "architecture", true, what));
  p.variant = EB_TRY(string_field(j, "variant", false, what));
  return p;
}

result<descriptor> parse_descriptor(const json& j, std::string_view what) {
  if (!j.is_object())
    return make_error(error_kind::invalid_argument, "{}: a descriptor is not an object", what);
  descriptor d;
  d.media_type = EB_TRY(string_field(j, "mediaType", false, what));
  d.digest = EB_TRY(string_field(j, "digest", true, what));
  EB_TRY(digest_hex(d.digest, what));
  const json* size = EB_TRY(field(j, "size", json::value_t::number_integer, true, what));
  if (size->is_number_unsigned() || size->get<int64_t>() >= 0) {
    d.size = size->get<int64_t>();
  }
  if (d.size < 0)
    return make_error(error_kind::invalid_argument, "{}: descriptor {} has a negative size", what,
                      d.digest);
  if (auto it = j.find("platform"); it != j.end() && !it->is_null())
    d.plat = EB_TRY(parse_platform(*it, what));
  if (auto it = j.find("annotations"); it != j.end() && it->is_object()) {
    if (auto r = it->find(ref_name_annotation); r != it->end() && r->is_string()) d.ref_name = *r;
  }
  return d;
}

result<int> schema_version(const json& doc, std::string_view what) {
  const json* v = EB_TRY(field(doc, "schemaVersion", json::value_t::number_integer, true, what));
  if (v->get<int64_t>() != 2)
    return make_error(error_kind::invalid_argument, "{}: schemaVersion {} (only 2 is supported)",
                      what, v->dump());
  return 2;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string platform::str() const {
  std::string out = os + "/" + architecture;
  if (!variant.empty()) out += "/" + variant;
  return out;
}

result<platform> parse_platform(std::string_view text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t slash = text.find('/', start);
    parts.emplace_back(
        text.substr(start, slash == std::string_view::npos ? text.npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  auto valid = [](const std::string& p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
  };
  if (parts.size() < 2 || parts.size() > 3 || !std::all_of(parts.begin(), parts.end(), valid))
    return make_error(error_kind::invalid_argument,
                      "--platform {}: expected OS/ARCH[/VARIANT], e.g. linux/arm64",
                      text.substr(0, 100));
  return platform{parts[0], parts[1], parts.size() == 3 ? parts[2] : std::string()};
}

platform host_platform() {
  struct utsname u {};
  ::uname(&u);
  std::string_view m = u.machine;
  platform p{"linux", std::string(m), ""};
  if (m == "x86_64")
    p.architecture = "amd64";
  else if (m == "aarch64")
    p.architecture = "arm64";
  else if (m == "i686" || m == "i386")
    p.architecture = "386";
  else if (m == "ppc64le")
    p.architecture = "ppc64le";
  else if (m == "s390x")
    p.architecture = "s390x";
  else if (m == "riscv64")
    p.architecture = "riscv64";
  else if (m.starts_with("armv7"))
    p = {"linux", "arm", "v7"};
  return p;
}

bool platform_matches(const platform& image, const platform& host) {
  if (image.os != host.os || image.architecture != host.architecture) return false;
  return image.variant.empty() || host.variant.empty() || image.variant == host.variant;
}

media_kind classify_media_type(std::string_view t) {
  if (t == "application/vnd.oci.image.index.v1+json" ||
      t == "application/vnd.docker.distribution.manifest.list.v2+json")
    return media_kind::index;
  if (t == "application/vnd.oci.image.manifest.v1+json" ||
      t == "application/vnd.docker.distribution.manifest.v2+json")
    return media_kind::manifest;
  if (t == "application/vnd.oci.image.config.v1+json" ||
      t == "application/vnd.docker.container.image.v1+json")
    return media_kind::config;
  if (t == "application/vnd.oci.image.layer.v1.tar" ||
      t == "application/vnd.oci.image.layer.v1.tar+gzip" ||
      t == "application/vnd.oci.image.layer.v1.tar+zstd" ||
      t == "application/vnd.docker.image.rootfs.diff.tar.gzip" ||
      t == "application/vnd.docker.image.rootfs.diff.tar")
    return media_kind::layer;
  return media_kind::unknown;
}

result<std::string> digest_hex(std::string_view digest, std::string_view what) {
  auto colon = digest.find(':');
  if (colon == std::string_view::npos)
    return make_error(error_kind::invalid_argument, "{}: '{}' is not a digest (ALG:HEX)", what,
                      digest);
  std::string_view alg = digest.substr(0, colon);
  std::string_view hex = digest.substr(colon + 1);
  if (alg != "sha256")
    return make_error(error_kind::unsupported,
                      "{}: digest algorithm '{}' is not supported (only sha256)", what,
                      alg.substr(0, 32));
  if (!is_sha256_hex(hex))
    return make_error(error_kind::invalid_argument, "{}: '{}' is not a sha256 digest", what,
                      digest.substr(0, 80));
  return std::string(hex);
}

result<index_doc> parse_index(std::string_view text, std::string_view what) {
  json doc = EB_TRY(parse_bounded(text, what));
  EB_TRY(object_of(doc, what));
  EB_TRY(schema_version(doc, what));
  std::string media = EB_TRY(string_field(doc, "mediaType", false, what));
  if (!media.empty() && classify_media_type(media) != media_kind::index)
    return make_error(error_kind::invalid_argument, "{}: mediaType '{}' is not an index", what,
                      media);
  const json* list = EB_TRY(field(doc, "manifests", json::value_t::array, true, what));
  index_doc out;
  for (const auto& m : *list) out.manifests.push_back(EB_TRY(parse_descriptor(m, what)));
  if (out.manifests.empty())
    return make_error(error_kind::invalid_argument, "{}: lists no manifests", what);
  return out;
}

result<manifest_doc> parse_manifest(std::string_view text, std::string_view what) {
  json doc = EB_TRY(parse_bounded(text, what));
  EB_TRY(object_of(doc, what));
  EB_TRY(schema_version(doc, what));
  std::string media = EB_TRY(string_field(doc, "mediaType", false, what));
  if (!media.empty() && classify_media_type(media) != media_kind::manifest)
    return make_error(error_kind::invalid_argument, "{}: mediaType '{}' is not an image manifest",
                      what, media);
  const json* config = EB_TRY(field(doc, "config", json::value_t::object, true, what));
  manifest_doc out;
  out.config = EB_TRY(parse_descriptor(*config, what));
  if (!out.config.media_type.empty() &&
      classify_media_type(out.config.media_type) != media_kind::config)
    return make_error(error_kind::invalid_argument,
                      "{}: config mediaType '{}' is not an image config", what,
                      out.config.media_type);
  const json* layers = EB_TRY(field(doc, "layers", json::value_t::array, true, what));
  for (const auto& l : *layers) {
    descriptor d = EB_TRY(parse_descriptor(l, what));
    if (classify_media_type(d.media_type) != media_kind::layer)
      return make_error(error_kind::unsupported,
                        "{}: layer {} has media type '{}' (evalbox reads tar, tar+gzip and "
                        "tar+zstd layers; foreign, non-distributable and encrypted ones are "
                        "refused)",
                        what, d.digest, d.media_type);
    out.layers.push_back(std::move(d));
  }
  return out;
}

json image_config::to_json() const {
  return json{
      {"architecture", architecture}, {"os", os},   {"variant", variant},         {"env", env},
      {"entrypoint", entrypoint},     {"cmd", cmd}, {"working_dir", working_dir}, {"user", user},
      {"diff_ids", diff_ids}};
}

result<image_config> image_config::from_json(const json& j) {
  constexpr std::string_view what = "image record config";
  if (!j.is_object()) return make_error(error_kind::invalid_argument, "{}: not an object", what);
  image_config c;
  c.architecture = EB_TRY(string_field(j, "architecture", true, what));
  c.os = EB_TRY(string_field(j, "os", true, what));
  c.variant = EB_TRY(string_field(j, "variant", false, what));
  c.env = EB_TRY(strings_field(j, "env", what));
  c.entrypoint = EB_TRY(strings_field(j, "entrypoint", what));
  c.cmd = EB_TRY(strings_field(j, "cmd", what));
  c.working_dir = EB_TRY(string_field(j, "working_dir", false, what));
  c.user = EB_TRY(string_field(j, "user", false, what));
  c.diff_ids = EB_TRY(strings_field(j, "diff_ids", what));
  return c;
}

result<image_config> parse_config(std::string_view text, std::string_view what) {
  json doc = EB_TRY(parse_bounded(text, what));
  EB_TRY(object_of(doc, what));
  image_config c;
  c.architecture = EB_TRY(string_field(doc, "architecture", true, what));
  c.os = EB_TRY(string_field(doc, "os", true, what));
  c.variant = EB_TRY(string_field(doc, "variant", false, what));
  if (const json* cfg = EB_TRY(field(doc, "config", json::value_t::object, false, what))) {
    c.env = EB_TRY(strings_field(*cfg, "Env", what));
    c.entrypoint = EB_TRY(strings_field(*cfg, "Entrypoint", what));
    c.cmd = EB_TRY(strings_field(*cfg, "Cmd", what));
    c.working_dir = EB_TRY(string_field(*cfg, "WorkingDir", false, what));
    c.user = EB_TRY(string_field(*cfg, "User", false, what));
  }
  const json* rootfs = EB_TRY(field(doc, "rootfs", json::value_t::object, true, what));
  std::string type = EB_TRY(string_field(*rootfs, "type", true, what));
  if (type != "layers")
    return make_error(error_kind::invalid_argument, "{}: rootfs.type is '{}', not 'layers'", what,
                      type);
  c.diff_ids = EB_TRY(strings_field(*rootfs, "diff_ids", what));
  for (const auto& d : c.diff_ids) EB_TRY(digest_hex(d, what));
  return c;
}

result<std::vector<docker_manifest_entry>> parse_docker_manifest(std::string_view text,
                                                                 std::string_view what) {
  json doc = EB_TRY(parse_bounded(text, what));
  if (!doc.is_array() || doc.empty())
    return make_error(error_kind::invalid_argument, "{}: not a non-empty JSON array", what);
  std::vector<docker_manifest_entry> out;
  for (const auto& item : doc) {
    EB_TRY(object_of(item, what));
    docker_manifest_entry e;
    e.config = EB_TRY(string_field(item, "Config", true, what));
    e.repo_tags = EB_TRY(strings_field(item, "RepoTags", what));
    e.layers = EB_TRY(strings_field(item, "Layers", what));
    out.push_back(std::move(e));
  }
  return out;
}

result<descriptor> select_manifest(const index_doc& index, std::string_view tag,
                                   const platform& host, std::string_view image) {
  std::vector<const descriptor*> candidates;
  std::set<std::string> tags;
  for (const auto& m : index.manifests) {
    if (!m.ref_name.empty()) tags.insert(m.ref_name);
    if (tag.empty() || m.ref_name == tag) candidates.push_back(&m);
  }
  if (candidates.empty())
    return make_error(error_kind::not_found, "image {}: no tag '{}' (tags: {})", image, tag,
                      tags.empty() ? std::string("none") : join({tags.begin(), tags.end()}));
  // Entries that are neither images nor indexes (signatures, attestations) are not candidates.
  std::erase_if(candidates, [](const descriptor* d) {
    auto kind = classify_media_type(d->media_type);
    return !d->media_type.empty() && kind != media_kind::index && kind != media_kind::manifest;
  });
  if (candidates.empty())
    return make_error(error_kind::invalid_argument, "image {}: the index names no image manifest",
                      image);
  std::vector<const descriptor*> fitting;
  std::vector<std::string> others;
  for (const auto* d : candidates) {
    if (!d->plat || platform_matches(*d->plat, host)) {
      fitting.push_back(d);
    } else {
      others.push_back(d->plat->str());
    }
  }
  if (fitting.empty()) {
    std::sort(others.begin(), others.end());
    others.erase(std::unique(others.begin(), others.end()), others.end());
    return make_error(error_kind::unsupported,
                      "image {}: offers {} only; this host is {} (import the image built for "
                      "this host's platform)",
                      image, join(others), host.str());
  }
  // One image per platform is expected; several without platforms (a layout holding many
  // images) need a tag to choose.
  const descriptor* with_platform = nullptr;
  for (const auto* d : fitting)
    if (d->plat) {
      with_platform = d;
      break;
    }
  if (with_platform) return *with_platform;
  std::set<std::string> digests;
  for (const auto* d : fitting) digests.insert(d->digest);
  if (digests.size() > 1)
    return make_error(error_kind::invalid_argument,
                      "image {}: holds {} images; name one with :TAG (tags: {})", image,
                      digests.size(),
                      tags.empty() ? std::string("none") : join({tags.begin(), tags.end()}));
  return *fitting.front();
}

}  // namespace evalbox::sandbox::image
