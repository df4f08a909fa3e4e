// A FencedStore (a SQLite file in a temp folder, or a PostgreSQL database with
// EngineServerFixture) behind a real Server on an ephemeral loopback port, spoken to with raw
// bytes. Shared by the HTTP suites.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"
#include "support/servers/store_engines.h"
#include "support/test_support.h"

namespace fencekit::testing {

class ServerFixture : public EngineFixture {
 protected:
  void SetUp() override { StartServer({}); }

  // `store_options.path` defaults to the fixture's database on engine_.
  void StartServer(ServerOptions options, StoreOptions store_options = {}) {
    server_.reset();
    store_.reset();
    if (store_options.path.empty()) store_options.path = Db();
    auto store = FencedStore::Open(std::move(store_options));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    options.port = 0;
    if (options.threads == 0) options.threads = 2;
    auto server = Server::Start(options, store_.get());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  RawResponse Call(std::string_view method, std::string_view target,
                   const std::vector<std::pair<std::string, std::string>>& headers = {},
                   std::string_view body = {}) {
    RawConnection c(server_->port());
    c.Send(Request(method, target, headers, body));
    return c.Read();
  }

  RawResponse PutWithToken(std::string_view key, std::string token, std::string_view body = "v") {
    return Call("PUT", "/v1/objects/" + std::string(key), {{"Fencing-Token", std::move(token)}},
                body);
  }

  std::unique_ptr<FencedStore> store_;
  std::unique_ptr<Server> server_;
};

// ServerFixture on the engine of the test's parameter.
using EngineServerFixture = OnEachEngine<ServerFixture>;

}  // namespace fencekit::testing
