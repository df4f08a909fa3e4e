// A fenced store's refusal details (fencekit/fencedstore/refusal.h) ride on common's Status:
// every copy reads them back, and a Status without them reads nothing.
#include "fencekit/fencedstore/refusal.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fencekit/common/status.h"

namespace fencekit {
namespace {

TEST(RefusalStatusTest, EachRefusalCarriesItsFieldsIntoEveryCopy) {
  Status stale = StaleTokenRefusal("stale", 7);
  Status stale_copy = stale;
  EXPECT_TRUE(stale_copy.IsStaleToken());
  EXPECT_EQ(stale_copy.message(), "stale");
  EXPECT_EQ(HighestToken(stale_copy), 7);
  EXPECT_EQ(BoundLock(stale_copy), std::nullopt);
  EXPECT_EQ(CurrentVersion(stale_copy), std::nullopt);
  EXPECT_EQ(RefusedKey(stale_copy), std::nullopt);

  Status wrong = WrongLockRefusal("wrong", "orders");
  Status wrong_copy;
  wrong_copy = wrong;
  EXPECT_TRUE(wrong_copy.IsWrongLock());
  EXPECT_EQ(BoundLock(wrong_copy), "orders");
  EXPECT_EQ(HighestToken(wrong_copy), std::nullopt);
  // Under --auth the bound lock may be hidden: present, but empty.
  EXPECT_EQ(BoundLock(WrongLockRefusal("wrong", "")), "");

  Result<int> failed = PreconditionRefusal("failed", 12, "k");
  Status failed_copy = failed.status();
  EXPECT_TRUE(failed_copy.IsPreconditionFailed());
  EXPECT_EQ(CurrentVersion(failed_copy), 12);
  EXPECT_EQ(RefusedKey(failed_copy), "k");
  EXPECT_EQ(CurrentVersion(PreconditionRefusal("failed", 0, "absent")), 0);
  EXPECT_EQ(HighestToken(failed_copy), std::nullopt);
  EXPECT_EQ(BoundLock(failed_copy), std::nullopt);
}

TEST(RefusalStatusTest, AStatusWithoutTheDetailReadsNothing) {
  for (const Status& s : {Status::Ok(), Status::StaleToken("no fence"), Status::NotFound("m"),
                          Status::WrongService("m")}) {
    EXPECT_EQ(s.detail(), nullptr) << s.ToString();
    EXPECT_EQ(RefusalDetailOf(s), nullptr) << s.ToString();
    EXPECT_EQ(HighestToken(s), std::nullopt) << s.ToString();
    EXPECT_EQ(BoundLock(s), std::nullopt) << s.ToString();
    EXPECT_EQ(CurrentVersion(s), std::nullopt) << s.ToString();
    EXPECT_EQ(RefusedKey(s), std::nullopt) << s.ToString();
  }
  // Another library's detail is not the store's.
  struct OtherDetail : StatusDetail {
    std::int64_t highest_token = 9;
  };
  Status other = Status::WithDetail(StatusCode::kStaleToken, "m", std::make_shared<OtherDetail>());
  EXPECT_NE(other.detail(), nullptr);
  EXPECT_EQ(RefusalDetailOf(other), nullptr);
  EXPECT_EQ(HighestToken(other), std::nullopt);
}

}  // namespace
}  // namespace fencekit
