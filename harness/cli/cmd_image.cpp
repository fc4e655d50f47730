// `evalbox image import|ls|rm`: the image store — OCI and docker images unpacked once, without
// a daemon, for fixtures that run in an image (docs/environments.md).
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <ctime>

#include "base/json.h"
#include "base/log.h"
#include "base/units.h"
#include "harness/cli/commands.h"
#include "harness/cli/image_store.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

namespace {

namespace img = sandbox::image;

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

std::string short_id(const std::string& digest) {
  auto colon = digest.find(':');
  return digest.substr(colon == std::string::npos ? 0 : colon + 1, 12);
}

std::string when(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "never";
  std::time_t t = unix_seconds;
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
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
  // Ctrl-C: the import stops at its next block, removes the partial layer and exits 130.
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
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
  }
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
               format_bytes(i.bytes), when(i.last_used), refs);
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
      "The image store: OCI and docker images unpacked once (layers shared between images, "
      "digests verified while reading), for fixtures that run in an image.\n"
      "\n"
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
