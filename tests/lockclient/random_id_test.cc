// Random ids (lease owners, service-id candidates): unique, also across a fork.
#include "random_id.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>

namespace fencekit::lockclient {
namespace {

TEST(RandomIdTest, IdsAre32HexDigitsAndDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 10'000; ++i) {  // many times the per-thread block of bytes
    auto id = RandomHex128();
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_EQ(id->size(), 32u);
    EXPECT_EQ(id->find_first_not_of("0123456789abcdef"), std::string::npos) << *id;
    EXPECT_TRUE(seen.insert(*id).second) << "repeated " << *id;
  }
}

TEST(RandomIdTest, AForkedChildNeverRepeatsItsParentsNextId) {
  ASSERT_TRUE(RandomHex128().ok());  // the parent's block now holds unused bytes
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto id = RandomHex128();
    std::string out = id.ok() ? *id : "error";
    ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
  }
  close(fds[1]);
  char buf[64] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(n, 32);
  auto parent_next = RandomHex128();
  ASSERT_TRUE(parent_next.ok());
  EXPECT_NE(std::string(buf, 32), *parent_next);
}

}  // namespace
}  // namespace fencekit::lockclient
