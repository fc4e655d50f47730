// `evalbox image pull|import|ls|rm`: the image store — registry, OCI and docker images unpacked
// once, without a daemon, for fixtures that run in an image (docs/environments.md).
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "base/json.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/image_store.h"
#include "sandbox/launch/host_program.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

namespace {

namespace img = sandbox::image;

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

// Ctrl-C and SIGTERM set g_interrupted: an import or pull stops at its next block, removes its
// partial layers and exits 130.
void watch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::string short_id(const std::string& digest) {
  auto colon = digest.find(':');
  return digest.substr(colon == std::string::npos ? 0 : colon + 1, 12);
}

// Progress on stderr, one line per layer event (the store calls this from the importing
// thread only).
void print_progress(const img::import_event& e) {
  using k = img::import_event::kind;
  const std::string layer =
      fmt::format("layer {}/{} {}", e.index + 1, e.count, short_id(e.diff_id));
  switch (e.what) {
    case k::resolved:
      fmt::print(stderr, "evalbox image: {} layer(s), image {}\n", e.count, short_id(e.diff_id));
      break;
    case k::layer_present:
      fmt::print(stderr, "evalbox image: {} already in the store\n", layer);
      break;
    case k::layer_start:
      fmt::print(stderr, "evalbox image: {} unpacking{}\n", layer,
                 e.blob_size >= 0 ? fmt::format(" ({})", format_bytes(e.blob_size)) : "");
      break;
    case k::layer_progress:
      if (::isatty(STDERR_FILENO))
        fmt::print(stderr, "evalbox image: {} {} read\n", layer, format_bytes(e.blob_bytes));
      break;
    case k::layer_done:
      fmt::print(stderr, "evalbox image: {} unpacked ({} in {:.1f}s)\n", layer,
                 format_bytes(e.blob_bytes), e.seconds);
      break;
  }
}

int do_import(const std::string& ref, const std::string& state_dir, bool as_json, bool quiet) {
  auto store = open_image_store(state_dir);
  if (!store) {
    log::error("{}", store.error().message);
    return harness::exit_status_of_error(store.error());
  }
  watch_interrupts();
  img::import_options options;
  options.cancel = &g_interrupted;
  if (!quiet) options.progress = print_progress;
  auto r = store->import(ref, std::filesystem::current_path(), options);
  if (!r) {
    if (r.error().kind == error_kind::cancelled) {
      fmt::print(stderr, "evalbox image: interrupted; no partial layer was kept\n");
      return exit_sigint;
    }
    log::error("{}", r.error().message);
    return harness::exit_status_of_error(r.error());
  }
  if (as_json) {
    fmt::print("{}", pretty_json(r->image.to_json()));
  } else {
    fmt::print("{} {}: {} layer(s), {} ({} unpacked now, {} already present)\n", ref, r->image.id,
               r->image.layers.size(), format_bytes(r->image.bytes), r->layers_unpacked,
               r->layers_present);
    if (r->devices_skipped > 0)
      fmt::print("skipped {} device node(s) (the sandbox provides /dev)\n", r->devices_skipped);
  }
  return exit_ok;
}

// A pull's progress. On a terminal: one line redrawn (layers done, bytes, rate); otherwise one
// line per layer started and finished. Called from the download threads, one call at a time.
class pull_progress {
 public:
  explicit pull_progress(std::string name)
      : name_(std::move(name)), tty_(::isatty(STDERR_FILENO) == 1 && !std::getenv("CI")) {}

  void operator()(const img::import_event& e) {
    using k = img::import_event::kind;
    const std::string layer =
        fmt::format("layer {}/{} {}", e.index + 1, e.count, short_id(e.diff_id));
    switch (e.what) {
      case k::resolved:
        count_ = e.count;
        say(fmt::format("{}: {} layer(s), image {}", name_, e.count, short_id(e.diff_id)));
        break;
      case k::layer_present:
        ++present_;
        if (!tty_) say(fmt::format("{} already in the store", layer));
        break;
      case k::layer_start:
        if (e.blob_size > 0) total_ += static_cast<uint64_t>(e.blob_size);
        if (!tty_)
          say(fmt::format("{} downloading{}", layer,
                          e.blob_size >= 0 ? fmt::format(" ({})", format_bytes(e.blob_size)) : ""));
        break;
      case k::layer_progress:
        read_[e.index] = e.blob_bytes;
        if (tty_) redraw();
        break;
      case k::layer_done:
        read_[e.index] = e.blob_bytes;
        ++done_;
        if (tty_) {
          redraw();
        } else {
          say(fmt::format("{} done ({} in {:.1f}s)", layer, format_bytes(e.blob_bytes), e.seconds));
        }
        break;
    }
  }

  void finish() {
    if (tty_ && drawn_) fmt::print(stderr, "\n");
  }

 private:
  void say(const std::string& line) {
    if (tty_ && drawn_) fmt::print(stderr, "\r\033[K");
    fmt::print(stderr, "evalbox image: {}\n", line);
    drawn_ = false;
  }
  void redraw() {
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100) && done_ + present_ < count_) return;
    last_ = now;
    uint64_t bytes = 0;
    for (const auto& [i, b] : read_) bytes += b;
    const double secs = std::chrono::duration<double>(now - start_).count();
    fmt::print(
        stderr, "\r\033[Kevalbox image: {}/{} layers, {} of {}, {}/s", done_ + present_, count_,
        format_bytes(bytes), format_bytes(total_),
        format_bytes(secs > 0 ? static_cast<uint64_t>(static_cast<double>(bytes) / secs) : 0));
    drawn_ = true;
  }

  std::string name_;
  bool tty_;
  bool drawn_ = false;
  size_t count_ = 0, done_ = 0, present_ = 0;
  uint64_t total_ = 0;
  std::map<size_t, uint64_t> read_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_;
};

struct pull_args {
  std::string ref, state_dir, platform;
  bool as_json = false, quiet = false;
};

int do_pull(const pull_args& a) {
  auto settings = cli_registry_settings();
  if (!settings) {
    log::error("{}", settings.error().message);
    return harness::exit_status_of_error(settings.error());
  }
  if (!a.platform.empty()) {
    auto p = img::parse_platform(a.platform);
    if (!p) {
      log::error("{}", p.error().message);
      return exit_usage;
    }
    (*settings)->want = *p;
  }
  auto ref = img::parse_registry_reference(a.ref, (*settings)->aliases);
  if (!ref) {
    log::error("{}", ref.error().message);
    return exit_usage;
  }
  auto store = open_image_store(a.state_dir);
  if (!store) {
    log::error("{}", store.error().message);
    return harness::exit_status_of_error(store.error());
  }
  watch_interrupts();
  (*settings)->cancel = &g_interrupted;
  img::import_options options;
  options.cancel = &g_interrupted;
  options.pull = img::pull_policy::always;
  options.registry = settings->get();
  auto progress = std::make_shared<pull_progress>(ref->str());
  if (!a.quiet) options.progress = [progress](const img::import_event& e) { (*progress)(e); };
  const auto started = std::chrono::steady_clock::now();
  auto r = store->import(ref->str(), {}, options);
  progress->finish();
  if (!r) {
    if (r.error().kind == error_kind::cancelled) {
      fmt::print(stderr, "evalbox image: interrupted; no partial layer was kept\n");
      return exit_sigint;
    }
    log::error("{}", r.error().message);
    return harness::exit_status_of_error(r.error());
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (a.as_json) {
    json j = r->image.to_json();
    j["reference"] = r->reference;
    j["reference_digest"] = r->reference_digest;
    j["layers_downloaded"] = r->layers_unpacked;
    j["layers_present"] = r->layers_present;
    j["bytes_downloaded"] = r->blob_bytes;
    j["seconds"] = secs;
    fmt::print("{}", pretty_json(j));
    return exit_ok;
  }
  fmt::print("{}@{}\n", r->reference.substr(0, r->reference.find('@')), r->reference_digest);
  fmt::print(
      "image {}: {} layer(s), {} unpacked; downloaded {} layer(s) ({}), {} already "
      "present; {:.1f}s\n",
      r->image.id, r->image.layers.size(), format_bytes(r->image.bytes), r->layers_unpacked,
      format_bytes(r->blob_bytes), r->layers_present, secs);
  if (r->devices_skipped > 0)
    fmt::print("skipped {} device node(s) (the sandbox provides /dev)\n", r->devices_skipped);
  return exit_ok;
}

int do_ls(const std::string& state_dir, bool as_json) {
  auto store = open_image_store(state_dir);
  if (!store) {
    log::error("{}", store.error().message);
    return harness::exit_status_of_error(store.error());
  }
  auto images = store->list();
  auto total = store->size();
  if (!images || !total) {
    const error& e = !images ? images.error() : total.error();
    log::error("{}", e.message);
    return harness::exit_status_of_error(e);
  }
  if (as_json) {
    json list = json::array();
    for (const auto& i : *images) list.push_back(i.to_json());
    fmt::print("{}", pretty_json(json{{"schema", "evalbox.image-list.v1"},
                                      {"store", store->root().string()},
                                      {"bytes", *total},
                                      {"images", list}}));
    return exit_ok;
  }
  fmt::print("{:<14}{:>7}{:>10}  {:<18}{}\n", "IMAGE", "LAYERS", "SIZE", "LAST USE", "REFERENCES");
  for (const auto& i : *images) {
    std::string refs;
    for (const auto& r : i.references) refs += (refs.empty() ? "" : ", ") + r;
    fmt::print("{:<14}{:>7}{:>10}  {:<18}{}\n", short_id(i.id), i.layers.size(),
               format_bytes(i.bytes), format_local_minute(i.last_used), refs);
  }
  fmt::print("{} image(s); layers take {} in {} (shared layers counted once)\n", images->size(),
             format_bytes(*total), store->root().string());
  return exit_ok;
}

int do_rm(const std::vector<std::string>& queries, const std::string& state_dir) {
  auto store = open_image_store(state_dir);
  if (!store) {
    log::error("{}", store.error().message);
    return harness::exit_status_of_error(store.error());
  }
  int rc = exit_ok;
  for (const auto& q : queries) {
    auto info = store->lookup(q, std::filesystem::current_path());
    status st = info ? store->remove(info->id, {}) : status(std::unexpected(info.error()));
    if (!st) {
      log::error("{}", st.error().message);
      rc = harness::exit_status_of_error(st.error());
      continue;
    }
    fmt::print("removed {}\n", info->id);
  }
  return rc;
}

}  // namespace

result<std::shared_ptr<img::registry_settings>> cli_registry_settings() {
  auto s = std::make_shared<img::registry_settings>(EB_TRY(img::registry_settings_from_host()));
  s->credential_helper = [](const std::string& helper,
                            const std::string& server) -> result<std::string> {
    sandbox::host_program p;
    p.argv = {"docker-credential-" + helper, "get"};
    p.inherit_env = true;
    p.input = server;
    p.stderr_to = sandbox::host_output::capture;
    p.timeout = std::chrono::seconds(30);
    auto r = EB_TRY(sandbox::run_host_program(p));
    if (r.timed_out) return make_error(error_kind::expired, "no answer within 30 s");
    if (r.exit_code != 0) {
      // The helper's own words: "credentials not found in native keychain", never a secret.
      std::string why = r.output.substr(0, 200);
      while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
      return make_error(error_kind::not_found, "exit {}: {}", r.exit_code, why);
    }
    return std::move(r.output);
  };
  return s;
}

result<img::store> open_image_store(const std::string& state_dir) {
  auto prep = sandbox::default_preparer_options();
  img::store_options o;
  o.state_root = state_dir.empty() ? prep.state_root : std::filesystem::path(state_dir);
  o.owner_uid = prep.sandbox_uid;
  o.owner_gid = prep.sandbox_gid;
  o.limits = EB_TRY(img::parse_limits(prep.image_max_layer_bytes, prep.image_max_layer_entries));
  return img::store::open(std::move(o));
}

void register_image(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "image",
      "The image store: registry, OCI and docker images unpacked once (layers shared between "
      "images, digests verified while reading), for fixtures that run in an image.\n"
      "\n"
      "  evalbox image pull python:3.13-slim             docker.io/library/python:3.13-slim\n"
      "  evalbox image pull ghcr.io/org/env@sha256:...   by digest\n"
      "  evalbox image import oci:images/py313           an OCI layout directory (tag: :TAG)\n"
      "  evalbox image import oci-archive:py313.tar      podman save --format oci-archive\n"
      "  evalbox image import docker-archive:app.tar     docker save / podman save\n"
      "  evalbox image import rootfs:./tree              a plain root filesystem directory\n"
      "  evalbox image ls                                images, layers, sizes, last use\n"
      "  evalbox image rm sha256:1a2b3c4d                by reference, id or digest prefix\n"
      "  evalbox gc --images --max-size 20GiB            drop least recently used images\n"
      "\n"
      "A Dockerfile becomes an image evalbox reads with `podman build -t app .` then\n"
      "`podman save -o app.tar app` (see docs/environments.md). The store lives in\n"
      "<state>/images; EVALBOX_IMAGE_MAX_LAYER_BYTES / _ENTRIES bound what a layer may expand to.");
  cmd->require_subcommand(1);
  auto state = std::make_shared<std::string>();
  cmd->add_option("--state-dir", *state,
                  "state root holding the store (default: EVALBOX_STATE_DIR or the standard "
                  "location)");

  auto* pull = cmd->add_subcommand(
      "pull",
      "Pull an image from its registry (no daemon, no podman): the manifest resolved to this "
      "host's platform, each layer not yet in the store downloaded and unpacked in one pass "
      "(several at once; digests and diff_ids verified before a layer is kept; Ctrl-C keeps no "
      "partial layer). Names are Docker's: python:3.13 is docker.io/library/python:3.13. "
      "Credentials come from REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, "
      "~/.config/containers/auth.json and ~/.docker/config.json (with its credential "
      "helpers); mirrors, aliases and insecure registries from registries.conf; "
      "HTTPS_PROXY/NO_PROXY are honoured (docs/environments.md, \"Registries\").");
  auto pull_a = std::make_shared<pull_args>();
  pull->add_option("REF", pull_a->ref,
                   "NAME[:TAG][@sha256:DIGEST], with or without docker:// (default tag: latest)")
      ->required();
  pull->add_option("--platform", pull_a->platform,
                   "OS/ARCH[/VARIANT] to pull from a multi-platform image (default: this host's)");
  pull->add_flag("--json", pull_a->as_json,
                 "print the image record (evalbox.image.v1) with the reference's digest and what "
                 "was downloaded");
  pull->add_flag("-q,--quiet", pull_a->quiet, "no progress");
  pull->fallthrough();
  pull->callback([&out, pull_a, state] {
    pull_a->state_dir = *state;
    out = [pull_a] { return do_pull(*pull_a); };
  });

  auto* imp = cmd->add_subcommand(
      "import",
      "Import an image: verify its index, manifest and config, then unpack each layer not yet "
      "in the store (progress on stderr; Ctrl-C keeps no partial layer). Importing an image "
      "already there only re-reads its metadata.");
  auto ref = std::make_shared<std::string>();
  auto imp_json = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  imp->add_option("REF", *ref,
                  "oci:DIR[:TAG] | oci-archive:FILE[:TAG] | docker-archive:FILE[:NAME:TAG] | "
                  "rootfs:DIR")
      ->required();
  imp->add_flag("--json", *imp_json, "print the image record (evalbox.image.v1)");
  imp->fallthrough();  // `evalbox image import REF --state-dir DIR` works too
  imp->add_flag("-q,--quiet", *quiet, "no progress lines");
  imp->callback([&out, ref, state, imp_json, quiet] {
    out = [ref, state, imp_json, quiet] { return do_import(*ref, *state, *imp_json, *quiet); };
  });

  auto* ls = cmd->add_subcommand("ls",
                                 "List images: id, layers, unpacked size, last use, "
                                 "the references each was imported as.");
  auto ls_json = std::make_shared<bool>(false);
  ls->add_flag("--json", *ls_json, "print evalbox.image-list.v1 JSON");
  ls->fallthrough();
  ls->callback(
      [&out, state, ls_json] { out = [state, ls_json] { return do_ls(*state, *ls_json); }; });

  auto* rm = cmd->add_subcommand(
      "rm",
      "Remove images and the layers no other image shares. An image a run is using is "
      "refused (busy) and nothing is removed.");
  auto queries = std::make_shared<std::vector<std::string>>();
  rm->add_option("IMAGE", *queries,
                 "reference as imported, id, or manifest digest (or 8+ hex "
                 "digits of one)")
      ->required();
  rm->fallthrough();
  rm->callback(
      [&out, state, queries] { out = [state, queries] { return do_rm(*queries, *state); }; });
}

}  // namespace evalbox::harness::cli
