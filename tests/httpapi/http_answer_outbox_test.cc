// AnswerOutbox: answers handed from the store's writer thread reach their sessions in one hop
// per burst, in order, and none is lost when one is handed while a burst is being delivered.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <thread>
#include <vector>

#include "net/answer_outbox.h"

namespace fencekit::httpapi {
namespace {

namespace http = boost::beast::http;

std::vector<unsigned>* delivered = nullptr;  // what Record saw, in order
AnswerOutbox* outbox = nullptr;              // for HandAnotherOnDelivery

void Record(std::shared_ptr<SessionBase>, HttpResponse&& res) {
  delivered->push_back(res.result_int());
}

void HandAnotherOnDelivery(std::shared_ptr<SessionBase>, HttpResponse&& res) {
  delivered->push_back(res.result_int());
  outbox->Hand(nullptr, &Record, HttpResponse(http::status::conflict, 11));
}

class AnswerOutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    delivered = &seen_;
    outbox = &box_;
  }
  void TearDown() override {
    delivered = nullptr;
    outbox = nullptr;
  }

  boost::asio::io_context ioc_;
  AnswerOutbox box_{ioc_};
  std::vector<unsigned> seen_;
};

TEST_F(AnswerOutboxTest, AnswersHandedTogetherAreDeliveredInOneHopInOrder) {
  std::thread writer([this] {  // as the store's writer thread, ending a commit
    box_.Hand(nullptr, &Record, HttpResponse(http::status::created, 11));
    box_.Hand(nullptr, &Record, HttpResponse(http::status::ok, 11));
    box_.Hand(nullptr, &Record, HttpResponse(http::status::conflict, 11));
  });
  writer.join();
  EXPECT_EQ(ioc_.run(), 1u);  // handlers run: one hop for the three
  EXPECT_EQ(seen_, (std::vector<unsigned>{201, 200, 409}));
}

TEST_F(AnswerOutboxTest, AnAnswerHandedDuringADeliveryGetsAHopOfItsOwn) {
  box_.Hand(nullptr, &HandAnotherOnDelivery, HttpResponse(http::status::ok, 11));
  EXPECT_EQ(ioc_.run(), 2u);
  EXPECT_EQ(seen_, (std::vector<unsigned>{200, 409}));
}

TEST_F(AnswerOutboxTest, EachBurstAfterADeliveryPostsAgain) {
  box_.Hand(nullptr, &Record, HttpResponse(http::status::ok, 11));
  EXPECT_EQ(ioc_.run(), 1u);
  ioc_.restart();
  box_.Hand(nullptr, &Record, HttpResponse(http::status::created, 11));
  box_.Hand(nullptr, &Record, HttpResponse(http::status::created, 11));
  EXPECT_EQ(ioc_.run(), 1u);
  EXPECT_EQ(seen_, (std::vector<unsigned>{200, 201, 201}));
}

}  // namespace
}  // namespace fencekit::httpapi
