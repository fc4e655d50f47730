// docker:// images as an image_source (see source.h): the manifest and config fetched and
// verified by registry_client, then the layer blobs downloaded several at once.
#include <atomic>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "sandbox/image/registry.h"
#include "sandbox/image/source.h"

namespace evalbox::sandbox::image {

namespace {

// Blob bytes another worker's failure makes pointless to read on: the next read ends.
class stoppable_source final : public byte_source {
 public:
  stoppable_source(byte_source& inner, const std::atomic<bool>& stop)
      : inner_(inner), stop_(stop) {}
  result<size_t> read(std::span<std::byte> buf) override {
    if (stop_.load()) return make_error(error_kind::cancelled, "another layer failed");
    return inner_.read(buf);
  }

 private:
  byte_source& inner_;
  const std::atomic<bool>& stop_;
};

class registry_source final : public image_source {
 public:
  registry_source(const reference& ref, const registry_settings& settings)
      : settings_(settings), client_(settings, ref) {}

  result<resolved_image> resolve() override {
    const reference& ref = client_.ref();
    const std::string name = ref.str();
    const platform want = settings_.want ? *settings_.want : host_platform();
    fetched_manifest top = EB_TRY(client_.manifest(ref.digest.empty() ? ref.tag : ref.digest));
    resolved_image out;
    out.ref = ref;
    out.reference_digest = top.digest;
    fetched_manifest chosen = std::move(top);
    for (int depth = 0; chosen.kind == media_kind::index; ++depth) {
      if (depth >= max_index_depth)
        return make_error(error_kind::invalid_argument, "image {}: indexes nested deeper than {}",
                          name, max_index_depth);
      index_doc index =
          EB_TRY(parse_index(chosen.bytes, fmt::format("image {}: index {}", name, chosen.digest)));
      descriptor d = EB_TRY(select_manifest(index, "", want, name));
      chosen = EB_TRY(client_.manifest(d.digest));
    }
    out.manifest_digest = chosen.digest;
    const std::string what = fmt::format("image {}: manifest {}", name, chosen.digest);
    manifest_doc manifest = EB_TRY(parse_manifest(chosen.bytes, what));
    if (manifest.config.size > static_cast<int64_t>(max_json_bytes))
      return make_error(error_kind::invalid_argument,
                        "image {}: config of {} bytes, more than "
                        "the {} allowed",
                        name, manifest.config.size, max_json_bytes);
    std::string config_text = EB_TRY(client_.small_blob(manifest.config.digest, max_json_bytes));
    out.config = EB_TRY(parse_config(
        config_text, fmt::format("image {}: config {}", name, manifest.config.digest)));
    out.config_digest = manifest.config.digest;
    platform got{out.config.os, out.config.architecture, out.config.variant};
    if (!platform_matches(got, want))
      return make_error(error_kind::unsupported,
                        "image {}: built for {}, not {} (--platform "
                        "chooses another)",
                        name, got.str(), want.str());
    out.layers = EB_TRY(layers_of(manifest, out.config, "sha256:", name));
    return out;
  }

  status for_each_layer(const resolved_image& image, const std::vector<size_t>& wanted,
                        const layer_fn& fn) override {
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::optional<error> first;
    auto worker = [&] {
      for (;;) {
        const size_t k = next.fetch_add(1);
        if (k >= wanted.size() || stop.load()) return;
        const size_t i = wanted[k];
        const layer_ref& l = image.layers.at(i);
        auto st = [&]() -> status {
          auto blob = EB_TRY(client_.open_blob(l.digest, l.size));
          stoppable_source guarded(*blob, stop);
          return fn(i, guarded);
        }();
        if (!st) {
          std::lock_guard lock(mu);
          // The first real failure is the one to report, not a sibling's "another failed".
          if (!first ||
              (first->kind == error_kind::cancelled && st.error().kind != error_kind::cancelled))
            first = st.error();
          stop.store(true);
          return;
        }
      }
    };
    const size_t n = std::min<size_t>(std::max(1, settings_.parallel), wanted.size());
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n; ++t) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    if (first) return std::unexpected(std::move(*first));
    return {};
  }

 private:
  const registry_settings& settings_;
  registry_client client_;
};

}  // namespace

std::unique_ptr<image_source> make_registry_source(const reference& ref,
                                                   const registry_settings& settings) {
  return std::make_unique<registry_source>(ref, settings);
}

}  // namespace evalbox::sandbox::image
