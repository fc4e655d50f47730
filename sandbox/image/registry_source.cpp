// docker:// images as an image_source (see source.h): the manifest and config fetched and
// verified by registry_client, then the layer blobs downloaded several at once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

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

// A blob downloaded on a thread of its own while the caller unpacks what has arrived: the
// network's waits and the decompression overlap instead of taking turns (one pass still: the
// bytes go from the socket to the unpacker through at most `max_buffered` of memory, never a
// file). The download starts at the first read — inside the layer's unpack lock, so that a
// second importer that finds the layer published downloads nothing. A read sees `cancel`
// (Ctrl-C) within 100 ms; destroying the source stops the download within a wait's slice.
class prefetching_source final : public byte_source {
 public:
  static constexpr size_t chunk_bytes = 256u << 10;
  static constexpr size_t max_buffered = 8u << 20;

  prefetching_source(registry_client& client, std::string digest, int64_t size,
                     const std::atomic<bool>* cancel)
      : client_(client), digest_(std::move(digest)), size_(size), cancel_(cancel) {}
  prefetching_source(const prefetching_source&) = delete;
  prefetching_source& operator=(const prefetching_source&) = delete;
  ~prefetching_source() override {
    {
      std::lock_guard lock(mu_);
      stop_.store(true);
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  result<size_t> read(std::span<std::byte> buf) override {
    if (!thread_.joinable()) thread_ = std::thread([this] { download(); });
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100),
                         [&] { return !chunks_.empty() || finished_; })) {
      if (cancel_ && cancel_->load())
        return make_error(error_kind::cancelled, "blob {}: cancelled", digest_);
    }
    if (chunks_.empty()) {
      if (failure_) return std::unexpected(*failure_);
      return size_t{0};
    }
    std::vector<std::byte>& front = chunks_.front();
    const size_t n = std::min(buf.size(), front.size() - front_offset_);
    std::memcpy(buf.data(), front.data() + front_offset_, n);
    front_offset_ += n;
    buffered_ -= n;
    if (front_offset_ == front.size()) {
      chunks_.pop_front();
      front_offset_ = 0;
    }
    lock.unlock();
    cv_.notify_all();
    return n;
  }

 private:
  void download() {
    auto finish = [&](std::optional<error> e) {
      std::lock_guard lock(mu_);
      failure_ = std::move(e);
      finished_ = true;
      cv_.notify_all();
    };
    auto blob = client_.open_blob(digest_, size_, &stop_);
    if (!blob) return finish(std::move(blob).error());
    for (;;) {
      std::vector<std::byte> chunk(chunk_bytes);
      size_t filled = 0;
      bool end = false;
      // Handed over when full, or after 20 ms of a slow server: the unpacker never waits for
      // more than it could already work on.
      const auto started = std::chrono::steady_clock::now();
      while (filled < chunk.size() && (filled == 0 || std::chrono::steady_clock::now() - started <
                                                          std::chrono::milliseconds(20))) {
        auto n = (*blob)->read(std::span(chunk).subspan(filled));
        if (!n) return finish(std::move(n).error());
        if (*n == 0) {
          end = true;
          break;
        }
        filled += *n;
      }
      chunk.resize(filled);
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return buffered_ < max_buffered || stop_.load(); });
      if (stop_.load()) break;
      buffered_ += chunk.size();
      if (!chunk.empty()) chunks_.push_back(std::move(chunk));
      lock.unlock();
      cv_.notify_all();
      if (end) break;
    }
    finish(std::nullopt);
  }

  registry_client& client_;
  const std::string digest_;
  const int64_t size_;
  const std::atomic<bool>* cancel_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::deque<std::vector<std::byte>> chunks_;
  size_t front_offset_ = 0;
  size_t buffered_ = 0;
  bool finished_ = false;
  std::optional<error> failure_;
  std::thread thread_;
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
          prefetching_source blob(client_, l.digest, l.size, settings_.cancel);
          stoppable_source guarded(blob, stop);
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
