// Fuzzes the readers of an image's metadata — OCI index, manifest and config JSON, and
// docker-archive's manifest.json — which come with the image or from a registry and are
// untrusted. Every input is tried as each kind. What a reader accepts must be usable the way the
// store uses it: a manifest is picked from an index for this host or the platform a pull asks
// for, every digest it holds passes digest_hex, and a config reads back unchanged from what
// evalbox keeps of it (the store's image record).
#include <algorithm>

#include "sandbox/image/oci.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace evalbox;
  using namespace evalbox::sandbox::image;
  const std::string_view text = fuzz::as_text(data, size);

  if (auto index = parse_index(text, "index.json")) {
    for (const auto& d : index->manifests)
      fuzz::check(static_cast<bool>(digest_hex(d.digest, "index entry")),
                  "an accepted index holds only valid digests");
    // The host's platform, and others as `evalbox image pull --platform` asks for them.
    static const platform wanted[] = {host_platform(),
                                      {"linux", "arm64", "v8"},
                                      {"linux", "arm", "v7"},
                                      {"windows", "amd64", ""}};
    for (std::string_view tag : {"", "latest"})
      for (const platform& want : wanted)
        if (auto d = select_manifest(*index, tag, want, "docker://fuzz/x:latest")) {
          fuzz::check(static_cast<bool>(digest_hex(d->digest, "selected")),
                      "the selected manifest is named by a valid digest");
          fuzz::check(std::any_of(index->manifests.begin(), index->manifests.end(),
                                  [&](const descriptor& m) { return m.digest == d->digest; }),
                      "the selected manifest is one the index lists");
          fuzz::check(!d->plat || platform_matches(*d->plat, want),
                      "the selected manifest is for the platform asked for");
          const media_kind kind = classify_media_type(d->media_type);
          fuzz::check(
              d->media_type.empty() || kind == media_kind::index || kind == media_kind::manifest,
              "the selected entry is an image manifest or an index");
        }
  }
  if (auto manifest = parse_manifest(text, "manifest")) {
    fuzz::check(static_cast<bool>(digest_hex(manifest->config.digest, "config")),
                "an accepted manifest names its config by a valid digest");
    for (const auto& l : manifest->layers)
      fuzz::check(static_cast<bool>(digest_hex(l.digest, "layer")),
                  "an accepted manifest names its layers by valid digests");
  }
  if (auto config = parse_config(text, "config")) {
    for (const auto& d : config->diff_ids)
      fuzz::check(static_cast<bool>(digest_hex(d, "diff_id")),
                  "an accepted config names its layers by valid diff_ids");
    json written = config->to_json();
    auto again = image_config::from_json(written);
    fuzz::check(static_cast<bool>(again), "a config evalbox kept reads back");
    fuzz::check(again->to_json() == written, "a config reads back unchanged");
    (void)canonical_json(written);
  }
  (void)parse_docker_manifest(text, "manifest.json");
  return 0;
}
