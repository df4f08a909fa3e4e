// The ZooKeeper client's leases (zookeeper/leases.h): an unrenewed lease's znode is handed to be
// deleted at its end and not before, once, out of the book first; a renewal moves the end; a
// forgotten node, or one back in line, never ends. On a fake clock; the reaper's own thread.
#include "zookeeper/leases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "fencekit/common/clock.h"
#include "fencekit/common/mutex.h"

namespace fencekit::lockclient::zk {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// What the reaper handed over: each node's owner and the clock's time then.
class Ended {
 public:
  explicit Ended(Clock* clock) : clock_(clock) {}
  void Add(const HeldNode& node, bool still_known) {
    MutexLock lock(mu_);
    owners_.push_back(node.owner);
    times_.push_back(clock_->Now());
    if (still_known) known_while_ending_ = true;
    cv_.NotifyAll();
  }
  // Waits (up to 10 s of real time) until `owner` has been handed over.
  bool WaitFor(const std::string& owner) {
    MutexLock lock(mu_);
    const auto until = std::chrono::steady_clock::now() + seconds(10);
    while (std::find(owners_.begin(), owners_.end(), owner) == owners_.end()) {
      if (!cv_.WaitUntil(mu_, until)) {
        return std::find(owners_.begin(), owners_.end(), owner) != owners_.end();
      }
    }
    return true;
  }
  std::vector<std::string> owners() const {
    MutexLock lock(mu_);
    return owners_;
  }
  std::chrono::steady_clock::time_point TimeOf(const std::string& owner) const {
    MutexLock lock(mu_);
    for (std::size_t i = 0; i < owners_.size(); ++i) {
      if (owners_[i] == owner) return times_[i];
    }
    return {};
  }
  bool known_while_ending() const {
    MutexLock lock(mu_);
    return known_while_ending_;
  }

 private:
  Clock* const clock_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<std::string> owners_ FENCEKIT_GUARDED_BY(mu_);
  std::vector<std::chrono::steady_clock::time_point> times_ FENCEKIT_GUARDED_BY(mu_);
  bool known_while_ending_ FENCEKIT_GUARDED_BY(mu_) = false;
};

HeldNode Node(std::string owner) {
  return HeldNode{.lock = "orders", .owner = std::move(owner), .path = "/fencekit/locks/orders/x"};
}

class LeasesTest : public testing::Test {
 protected:
  FakeClock clock_;
  Ended ended_{&clock_};
  // Last: its reaper stops before what it calls is destroyed.
  Leases leases_{&clock_, [this](const HeldNode& node) {
                   ended_.Add(node, leases_.Known(node.owner).has_value());
                 }};
};

TEST_F(LeasesTest, AnUnsettledNodeEndsAtItsTimeNotBeforeAndOnce) {
  const auto start = clock_.Now();
  leases_.Unsettled(Node("late"), start + seconds(1));
  // A node ending earlier: once it is handed over, the reaper has looked at the time after the
  // advance, and "late" (not due yet) must still be there.
  leases_.Unsettled(Node("early"), start + milliseconds(500));
  clock_.Advance(milliseconds(999));
  ASSERT_TRUE(ended_.WaitFor("early"));
  EXPECT_TRUE(leases_.Known("late").has_value());
  EXPECT_EQ(ended_.owners(), std::vector<std::string>{"early"});

  clock_.Advance(milliseconds(1));
  ASSERT_TRUE(ended_.WaitFor("late"));
  EXPECT_GE(ended_.TimeOf("late"), start + seconds(1));
  EXPECT_FALSE(leases_.Known("late").has_value());
  // Out of the book before it is handed over, and handed over once.
  EXPECT_FALSE(ended_.known_while_ending());
  leases_.Unsettled(Node("marker"), clock_.Now());
  clock_.Advance(seconds(5));
  ASSERT_TRUE(ended_.WaitFor("marker"));
  EXPECT_EQ(ended_.owners(), (std::vector<std::string>{"early", "late", "marker"}));
}

TEST_F(LeasesTest, ARenewalMovesTheEnd) {
  const auto start = clock_.Now();
  leases_.Unsettled(Node("holder"), start + seconds(1));
  leases_.Renewed("holder", start + seconds(3));
  leases_.Unsettled(Node("marker"), start + seconds(2));
  clock_.Advance(seconds(2));
  ASSERT_TRUE(ended_.WaitFor("marker"));
  EXPECT_TRUE(leases_.Known("holder").has_value());

  clock_.Advance(seconds(1));
  ASSERT_TRUE(ended_.WaitFor("holder"));
  EXPECT_GE(ended_.TimeOf("holder"), start + seconds(3));
}

TEST_F(LeasesTest, AForgottenNodeAndOneBackInLineNeverEnd) {
  const auto start = clock_.Now();
  leases_.Unsettled(Node("released"), start + seconds(1));
  leases_.Forget("released");
  leases_.Unsettled(Node("retried"), start + seconds(1));
  leases_.InLine(Node("retried"));  // a retry took its znode up: in line, no end
  leases_.Unsettled(Node("marker"), start + seconds(1));
  clock_.Advance(seconds(2));
  ASSERT_TRUE(ended_.WaitFor("marker"));
  EXPECT_EQ(ended_.owners(), std::vector<std::string>{"marker"});
  EXPECT_FALSE(leases_.Known("released").has_value());
  ASSERT_TRUE(leases_.Known("retried").has_value());
  EXPECT_EQ(leases_.Known("retried")->path, "/fencekit/locks/orders/x");
}

}  // namespace
}  // namespace fencekit::lockclient::zk
