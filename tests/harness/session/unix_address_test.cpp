// Unix socket addresses of any length (harness/session/unix_address.h): a socket at a path far
// past sun_path's 107 bytes is bound and reached by connect, and is a socket at that path.
#include "harness/session/unix_address.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "base/fs.h"

namespace evalbox::harness {
namespace {

namespace fs = std::filesystem;

// Binds and listens at `path`, connects a second socket through a fresh address of it, and
// passes a byte across.
void round_trip(const fs::path& path) {
  auto listen_addr = unix_address_of(path);
  ASSERT_TRUE(listen_addr) << listen_addr.error().message;
  unique_fd server(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::bind(server.get(), listen_addr->get(), listen_addr->size()), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(server.get(), 1), 0);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << "no socket at " << path;
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  auto connect_addr = unix_address_of(path);
  ASSERT_TRUE(connect_addr) << connect_addr.error().message;
  unique_fd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(client.get(), connect_addr->get(), connect_addr->size()), 0)
      << std::strerror(errno);
  unique_fd accepted(::accept4(server.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  ASSERT_EQ(::write(client.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(accepted.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(UnixAddress, AShortPathIsUsedAsItIs) {
  temp_dir d("evalbox-ua");
  const fs::path p = d.path() / "socket";
  ASSERT_LT(p.string().size(), 100u);
  auto a = unix_address_of(p);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_FALSE(a->dir);
  EXPECT_EQ(std::string(a->addr.sun_path), p.string());
  round_trip(p);
}

TEST(UnixAddress, APathFarPastSunPathIsBoundAndReached) {
  temp_dir d("evalbox-ua");
  fs::path deep = d.path();
  for (int i = 0; i < 6; ++i) deep /= std::string(50, static_cast<char>('a' + i));
  fs::create_directories(deep);
  const fs::path p = deep / "socket";
  ASSERT_GT(p.string().size(), 300u);
  auto a = unix_address_of(p);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->dir);
  round_trip(p);
}

TEST(UnixAddress, SaysWhatIsWrongWithAPathItCannotServe) {
  temp_dir d("evalbox-ua");
  auto missing = unix_address_of(d.path() / std::string(120, 'm') / "socket");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, error_kind::not_found) << missing.error().message;
  auto long_name = unix_address_of(d.path() / std::string(120, 'n'));
  ASSERT_FALSE(long_name);
  EXPECT_EQ(long_name.error().kind, error_kind::invalid_argument) << long_name.error().message;
}

}  // namespace
}  // namespace evalbox::harness
