// The bundle store: content-addressed read-only trees a fixture or suite names (`bundles:`),
// each verified against its tree digest once, when it enters the store, and immutable after.
//
// Layout (<state>/bundles/, 0700):
//   <hex>/tree               a finished bundle: what runs bind read-only; <hex> is its tree
//                            digest, so a request naming it needs no digest of its own
//                            (spec/validate.cpp: in_bundle_store)
//   .tmp-<hex>-<pid>-<n>/    a bundle being made; renamed to <hex> only once its digest
//                            matched: a crash leaves only .tmp-* names, which nothing reads
//
// A directory is copied (workspace::copy_tree: links kept as links, special files left out,
// setuid and setgid bits dropped); a tar (plain, gzip or zstd) is unpacked by the image store's
// writer (image/tree_writer.h: hostile content, written beneath the tree, never through a
// link). Either way the digest is taken of the tree as stored, so what every run sees is what
// was verified; `evalbox bundle digest` makes the same tree in a temporary directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <fmt/format.h>

#include "base/digest.h"
#include "base/fs.h"
#include "base/unique_fd.h"
#include "sandbox/image/layer.h"
#include "sandbox/image/tree_writer.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/prepare/stores.h"
#include "sandbox/workspace/tree.h"

namespace evalbox::sandbox {
inline namespace prepare {

namespace fs = std::filesystem;

namespace {

std::atomic<unsigned> temporaries{0};

// `source`'s tree into the existing empty directory `tree`, owned by uid:gid.
status fill_bundle(const fs::path& source, const fs::path& tree, uid_t uid, gid_t gid) {
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0) return sys_error(errno, "bundle {}: stat", source.string());
  if (S_ISDIR(st.st_mode))
    return workspace::copy_tree(source, tree, workspace::copy_mode::copy, uid, gid);
  if (!S_ISREG(st.st_mode))
    return make_error(error_kind::invalid_argument,
                      "bundle {} is neither a directory nor a tar file", source.string());
  unique_fd fd(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error(errno, "open {}", source.string());
  image::writer_options wo;
  wo.owner_uid = uid;
  wo.owner_gid = gid;
  wo.chown = ::geteuid() == 0;
  auto writer = EB_TRY(image::tree_writer::open(tree, wo));
  image::fd_source src(std::move(fd));
  auto unpacked = image::unpack_layer(src, image::layer_expect{}, writer, image::unpack_control{});
  if (!unpacked)
    return std::unexpected(std::move(unpacked).error().with_context(
        fmt::format("bundle {}: read it as a tar", source.string())));
  if (unpacked->whiteouts > 0 || unpacked->devices_skipped > 0)
    return make_error(error_kind::invalid_argument,
                      "bundle {} holds overlay whiteouts (.wh. entries) or device nodes: a "
                      "bundle is a plain tree of files, directories and links",
                      source.string());
  return writer.finish();
}

// "sha256:<hex>" -> "<hex>", or an error saying how to write it.
result<std::string> digest_hex(std::string_view digest) {
  if (!digest.starts_with("sha256:") || !is_sha256_hex(digest.substr(7)))
    return make_error(error_kind::invalid_argument,
                      "bundle digest '{}' is not sha256:<64 lowercase hex digits>: write what "
                      "`evalbox bundle digest PATH` prints",
                      digest);
  return std::string(digest.substr(7));
}

}  // namespace

result<std::string> bundle_digest(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return sys_error(errno, "bundle {}: stat", path.string());
  std::error_code ec;
  const fs::path tmp_base = fs::temp_directory_path(ec);
  if (ec) return sys_error(ec.value(), "temporary directory");
  const fs::path tmp = tmp_base / fmt::format("evalbox-bundle-{}-{}", ::getpid(), temporaries++);
  if (::mkdir(tmp.c_str(), 0700) != 0) return sys_error(errno, "mkdir {}", tmp.string());
  const fs::path tree = tmp / "tree";
  auto digest = [&]() -> result<std::string> {
    if (::mkdir(tree.c_str(), 0755) != 0) return sys_error(errno, "mkdir {}", tree.string());
    EB_TRY(fill_bundle(path, tree, ::getuid(), ::getgid()));
    return tree_digest(tree);
  }();
  (void)remove_tree(tmp);
  if (!digest) return std::unexpected(std::move(digest).error());
  return "sha256:" + *digest;
}

result<fs::path> preparer::resolve_bundle(const fs::path& source, std::string_view digest) {
  const auto& o = options();
  const std::string hex = EB_TRY(digest_hex(digest));
  const fs::path store = bundle_store_dir(o.state_root);
  const fs::path final_dir = store / hex;
  std::error_code ec;
  if (fs::is_directory(final_dir / "tree", ec)) return final_dir / "tree";
  const fs::path tmp = EB_TRY(make_store_temporary(o.state_root, store, hex, "tmp"));
  auto fail = [&](error e) -> std::unexpected<error> {
    (void)remove_tree(tmp);
    return std::unexpected(std::move(e));
  };
  const fs::path tree = tmp / "tree";
  if (::mkdir(tree.c_str(), 0755) != 0) return fail(sys_error(errno, "mkdir").error());
  if (::geteuid() == 0 && ::chown(tree.c_str(), o.sandbox_uid, o.sandbox_gid) != 0)
    return fail(sys_error(errno, "chown {}", tree.string()).error());
  if (auto s = fill_bundle(source, tree, o.sandbox_uid, o.sandbox_gid); !s)
    return fail(std::move(s).error());
  auto found = tree_digest(tree);
  if (!found) return fail(std::move(found).error().with_context("digest bundle"));
  if (*found != hex)
    return fail(error{error_kind::invalid_argument,
                      fmt::format("bundle {} does not match its digest: expected sha256:{}, found "
                                  "sha256:{}; if the new content is intended, write digest: "
                                  "\"sha256:{}\" (`evalbox bundle digest {}` prints it)",
                                  source.string(), hex, *found, *found, source.string()),
                      0});
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    // Another run stored the same bundle meanwhile: theirs is as good.
    if (errno == EEXIST || errno == ENOTEMPTY) {
      (void)remove_tree(tmp);
      return final_dir / "tree";
    }
    return fail(sys_error(errno, "rename {} to {}", tmp.string(), final_dir.string()).error());
  }
  return final_dir / "tree";
}

}  // namespace prepare
}  // namespace evalbox::sandbox
