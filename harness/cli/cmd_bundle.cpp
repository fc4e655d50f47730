// `evalbox bundle digest PATH`: the digest a fixture's or suite's `bundles:` entry names — the
// tree digest of the directory, or of the tree a tar unpacks to (docs/fixture-format.md,
// "bundles").
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "harness/cli/commands.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::harness::cli {

void register_bundle(CLI::App& app, action& out) {
  auto* cmd = app.add_subcommand(
      "bundle",
      "Content-addressed bundles: a directory or tar a fixture or suite names under `bundles:` "
      "with its digest, verified once when it enters the bundle store (<state>/bundles) and "
      "mounted read-only in every run that names it.\n"
      "\n"
      "  evalbox bundle digest bundles/reference-lib.tar   the digest to write in `digest:`");
  cmd->require_subcommand(1);
  auto* digest = cmd->add_subcommand(
      "digest",
      "Print the digest of the bundle at PATH (sha256:...): the tree digest of the directory, "
      "or of the tree the tar (plain, gzip or zstd) unpacks to — paths, types, permission bits "
      "and contents, the same on every machine.");
  auto path = std::make_shared<std::string>();
  digest->add_option("PATH", *path, "a directory, or a tar file")->required();
  digest->callback([&out, path] {
    out = [path] {
      auto d = sandbox::bundle_digest(*path);
      if (!d) {
        fmt::print(stderr, "evalbox bundle digest: {}\n", d.error().message);
        return static_cast<int>(exit_status_of_error(d.error()));
      }
      fmt::print("{}\n", *d);
      return 0;
    };
  });
}

}  // namespace evalbox::harness::cli
