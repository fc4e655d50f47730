// A session's state as a stack of layers (docs/sessions.md, "State"): the frozen layers its
// writable trees are stacked from, fresh uppers over them for one launch, and a read-only view
// of its workspace on the host for graders that read files there.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "sandbox/launch/launcher.h"
#include "sandbox/prepare/preparer.h"

namespace evalbox::sandbox {
inline namespace live {

// The layers a session's writable trees are stacked from, top-most first. `root` lies above the
// prepared session's own root upper and its image (launch_options::root_layers).
struct layer_stack {
  std::vector<std::filesystem::path> workspace, home, root;
};

// Fresh uppers for one launch over `stack` — <scratch>/`name`/{workspace,home,root}/{upper,work}
// on the session's disk, owned by the sandbox's root — set into `o` (workspace_overlay,
// home_overlay, and with an image the root's layers). Returns the directory, which the caller
// removes when the launch is over.
result<std::filesystem::path> stack_layers(prepared_session& session, const layer_stack& stack,
                                           std::string_view name, launch_options& o);

// A read-only view of `layers` (a workspace's, top-most first) on the host at the empty
// directory `at`: an overlay (userxattr, as the session's own) when evalbox is root, else a
// merged copy owned by the caller. Gone (unmounted, removed) with the object.
class layers_view {
 public:
  static result<layers_view> make(const std::vector<std::filesystem::path>& layers,
                                  const std::filesystem::path& at);
  layers_view(layers_view&& other) noexcept;
  layers_view& operator=(layers_view&&) = delete;
  layers_view(const layers_view&) = delete;
  ~layers_view();
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return at_; }

 private:
  layers_view() = default;
  std::filesystem::path at_;
  bool mounted_ = false;
};

}  // namespace live
}  // namespace evalbox::sandbox
