// Test scaffolding for the preparation tests: a scratch tree with a fixture workspace, a
// credential source and a state root, a valid request over them, and a digest of the state
// root (listing + contents) to prove that a rejection left it byte-for-byte unchanged.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "base/digest.h"
#include "base/fs.h"
#include "sandbox/mount/mount.h"
#include "sandbox/prepare/preparer.h"
#include "sandbox/spec/request.h"

namespace evalbox::testing {

namespace fs = std::filesystem;

class prep_env {
 public:
  prep_env() : tmp_("evalbox-prep") {
    root = tmp_.path();
    // Keep the scratch tree traversable for the sandbox id (the leases are opened by path).
    ::chmod(root.c_str(), 0755);
    source = root / "fixture" / "workspace";
    state = root / "state";
    creds = root / "creds";
    (void)make_dirs(source / ".git", 0755);
    (void)make_dirs(source / "src", 0755);
    (void)make_dirs(creds, 0700);
    (void)write_file(source / "README.md", "hello\n", 0644);
    (void)write_file(source / "src" / "run.sh", "#!/bin/sh\necho hi\n", 0755);
    (void)write_file(source / "src" / "secret.txt", "owner only\n", 0600);
    (void)write_file(source / ".git" / "HEAD", "ref: refs/heads/main\n", 0644);
    (void)!::symlink("/etc/passwd", (source / "outside-link").c_str());
    (void)!::symlink("README.md", (source / "readme-link").c_str());
    (void)write_file(creds / "auth.json", R"({"token":"sk-test-0123456789abcdef"})", 0600);
  }
  ~prep_env() {
    // Mounts made by a failed test must not keep temp_dir from removing the tree.
    (void)sandbox::mount::unmount_all_under(root);
  }

  // A valid request over this tree (run id unique per process and `tag`).
  sandbox::session_request request(const std::string& tag = "run") const {
    sandbox::session_request r;
    r.run_id = tag + "-" + std::to_string(::getpid());
    r.authorized_until = std::chrono::system_clock::now() + std::chrono::hours(1);
    r.argv = {"/bin/true"};
    r.env = {{"PATH", "/usr/bin:/bin"}};
    r.workspace.source = source;
    r.home.adapter = "test";
    r.home.directories = {".config/agent"};
    r.home.files = {{".config/agent/settings.json", "{}\n", 0644}};
    r.limits.disk_bytes = 64ull << 20;
    r.protected_roots = {root / "protected"};
    return r;
  }

  sandbox::preparer_options options() const {
    auto o = sandbox::default_preparer_options();
    o.state_root = state;
    return o;
  }

  // Every path below the state root with its type, mode, owner and content digest.
  std::string state_fingerprint() const {
    std::string out;
    std::error_code ec;
    if (!fs::exists(state, ec)) return "<absent>";
    for (fs::recursive_directory_iterator it(state, ec), end; !ec && it != end; it.increment(ec)) {
      struct stat st {};
      ::lstat(it->path().c_str(), &st);
      out += it->path().lexically_relative(state).string() + " " + std::to_string(st.st_mode) +
             " " + std::to_string(st.st_uid) + " " + std::to_string(st.st_size);
      if (S_ISREG(st.st_mode)) out += " " + sha256_file(it->path()).value_or("?");
      out += "\n";
    }
    return out;
  }

  fs::path root, source, state, creds;

 private:
  temp_dir tmp_;
};

}  // namespace evalbox::testing
