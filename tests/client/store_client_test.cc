// The C++ StoreClient against a real fenced server on loopback.
#include "fencekit/httpapi/store_client.h"

#include <gtest/gtest.h>

#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"
#include "support/test_support.h"

namespace fencekit {
namespace {

using testing::TempDir;

FencingToken T(std::int64_t v) { return FencingToken::FromInt(v).value(); }

class StoreClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = FencedStore::Open({.path = dir_.File("store.db")});
    ASSERT_TRUE(store.ok());
    store_ = std::move(store).value();
    auto server = Server::Start({.port = 0, .threads = 1}, store_.get());
    ASSERT_TRUE(server.ok());
    server_ = std::move(server).value();
    auto client = StoreClient::Open("http://127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
  }
  TempDir dir_;
  std::unique_ptr<FencedStore> store_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<StoreClient> client_;
};

TEST_F(StoreClientTest, PutGetDeleteRoundTrip) {
  auto put = client_->Put("", T(4), "k/é", std::string("v\0v", 3));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(put->created);
  EXPECT_EQ(put->version, 1);
  auto got = client_->Get("k/é");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->value, std::string("v\0v", 3));
  EXPECT_EQ(got->token, T(4));
  EXPECT_EQ(got->version, 1);
  EXPECT_EQ(client_->Highest("k/é")->value(), T(4));
  auto del = client_->Delete("", T(4), "k/é");
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(del->version, 1);
  EXPECT_TRUE(client_->Get("k/é").status().IsNotFound());
}

TEST_F(StoreClientTest, StaleTokenIsToldApartWithHighest) {
  ASSERT_TRUE(client_->Put("L", T(8), "a", "v").ok());
  auto r = client_->Put("L", T(7), "b", "v");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsStaleToken()) << r.status().ToString();
  EXPECT_EQ(HighestToken(r.status()), 8);
  EXPECT_NE(r.status().message().find("stale"), std::string::npos);
}

TEST_F(StoreClientTest, ConditionalWritesTellTheKeysVersion) {
  auto created = client_->Write("L", T(2), ObjectWrite{false, "k", "v", kIfAbsent}, {});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(created->created);
  auto refused = client_->Write("L", T(2), ObjectWrite{false, "k", "w", kIfAbsent}, {});
  ASSERT_TRUE(refused.status().IsPreconditionFailed()) << refused.status().ToString();
  EXPECT_EQ(CurrentVersion(refused.status()), created->version);
  EXPECT_EQ(RefusedKey(refused.status()), "k");
  auto wrong = client_->Write("L", T(2), ObjectWrite{true, "k", {}, created->version + 1}, {});
  EXPECT_TRUE(wrong.status().IsPreconditionFailed());
  auto updated = client_->Write("L", T(2), ObjectWrite{false, "k", "w", created->version}, {});
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(client_->Get("k")->version, updated->version);
  EXPECT_TRUE(
      client_->Write("L", T(2), ObjectWrite{false, "k", "x", -1}, {}).status().IsInvalidArgument());
}

TEST_F(StoreClientTest, BatchesAreAllOrNone) {
  std::vector<ObjectWrite> writes = {{false, "a", "1", std::nullopt},
                                     {false, "b", std::string("\xff\0", 2), kIfAbsent},
                                     {true, "c", {}, std::nullopt}};
  auto r = client_->Batch("job", T(3), writes, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[1].key, "b");
  EXPECT_TRUE((*r)[1].created);
  EXPECT_EQ((*r)[2].version, 0);
  EXPECT_EQ(client_->Get("b")->value, std::string("\xff\0", 2));
  // Stale, and a failed precondition: nothing of either batch is applied.
  auto stale = client_->Batch("job", T(2), {{false, "d", "x", std::nullopt}}, {});
  ASSERT_TRUE(stale.status().IsStaleToken()) << stale.status().ToString();
  EXPECT_EQ(HighestToken(stale.status()), 3);
  auto failed = client_->Batch("job", T(3), {{false, "d", "x", std::nullopt}, writes[1]}, {});
  ASSERT_TRUE(failed.status().IsPreconditionFailed()) << failed.status().ToString();
  EXPECT_EQ(RefusedKey(failed.status()), "b");
  EXPECT_TRUE(client_->Get("d").status().IsNotFound());
  EXPECT_TRUE(client_->Batch("", T(3), writes, {}).status().IsInvalidArgument());
  EXPECT_TRUE(client_->Batch("job", T(3), {}, {}).status().IsInvalidArgument());
}

TEST_F(StoreClientTest, ListPagesWithTheNextCursor) {
  for (const char* key : {"p/1", "p/2", "p/\xff", "q"}) {
    ASSERT_TRUE(client_->Put("L", T(1), key, "v").ok()) << key;
  }
  std::vector<std::string> keys;
  std::string after;
  for (int i = 0; i < 5; ++i) {
    auto page = client_->List("p/", after, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& o : page->objects) keys.push_back(o.key);
    if (!page->next) break;
    after = *page->next;
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"p/1", "p/2", "p/\xff"}));
  auto defaults = client_->List("", "", 0);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->objects.size(), 4u);
  EXPECT_EQ(defaults->objects[0].lock, "L");
  EXPECT_TRUE(client_->List("", "", 1001).status().IsInvalidArgument());
}

TEST_F(StoreClientTest, BadRequestIsInvalidArgument) {
  auto r = client_->Put("", T(1), std::string(2000, 'k'), "v");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_TRUE(client_->Put("bad\nlock", T(1), "k", "v").status().IsInvalidArgument());
}

TEST_F(StoreClientTest, DownServerIsUnavailableAndReconnectsWhenBack) {
  ASSERT_TRUE(client_->Put("", T(1), "k", "v").ok());  // keep-alive connection is open
  std::uint16_t port = server_->port();
  server_.reset();
  auto r = client_->Get("k");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsUnavailable()) << r.status().ToString();
  auto server = Server::Start({.port = port, .threads = 1}, store_.get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  server_ = std::move(server).value();
  EXPECT_EQ(client_->Get("k")->value, "v");
}

TEST_F(StoreClientTest, RejectsBadUrls) {
  for (const char* url : {"ftp://x:1", "not a url", "http://h:1/path", "https://h:1/path"}) {
    auto c = StoreClient::Open(url);
    EXPECT_TRUE(c.status().IsInvalidArgument()) << url;
  }
}

}  // namespace
}  // namespace fencekit
