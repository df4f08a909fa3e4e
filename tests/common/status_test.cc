// Result<T>'s contract on misuse: value() on an error names the error before aborting.
#include "fencekit/common/status.h"

#include <gtest/gtest.h>

#include <string>

namespace fencekit {
namespace {

TEST(ResultDeathTest, ValueOnAnErrorAbortsWithTheStatusMessage) {
  Result<int> r = Status::NotFound("no object is stored under this key");
  EXPECT_DEATH((void)r.value(),
               "Result::value\\(\\) called on an error: not_found: no object is stored under "
               "this key");
}

TEST(ResultDeathTest, EveryAccessorOnAnErrorAborts) {
  const Result<std::string> r = Status::Busy("the lock is held");
  EXPECT_DEATH((void)*r, "busy: the lock is held");
  EXPECT_DEATH((void)r->size(), "busy: the lock is held");
  EXPECT_DEATH((void)Result<std::string>(Status::Timeout("too slow")).value(), "timeout: too slow");
}

TEST(ResultTest, ValueOnSuccessReturnsTheValue) {
  Result<std::string> r = std::string("v");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), "v");
  EXPECT_EQ(std::move(r).value(), "v");
}

}  // namespace
}  // namespace fencekit
