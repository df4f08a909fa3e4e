// The SQLite implementation of FencedStore: it opens the database, migrates its schema, and
// routes writes to the single writer (writer.h) and reads to the reader pool (reader_pool.h).
#include "fencekit/fencedstore/store.h"

#include <future>
#include <utility>

#include "connection.h"
#include "fencekit/common/names.h"
#include "reader_pool.h"
#include "schema.h"
#include "sqlite/sqlite_util.h"
#include "sqlite/transaction.h"
#include "writer.h"

namespace fencekit {
namespace {

class SqliteStore final : public FencedStore {
 public:
  explicit SqliteStore(StoreOptions o)
      : options_(std::move(o)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
        writer_(options_, clock_),
        readers_(options_) {}

  ~SqliteStore() override { (void)Close(); }

  Status Init() {
    if (options_.max_batch == 0) options_.max_batch = 1;
    for (const auto& [prefix, lock] : options_.lock_for) {
      if (auto s = CheckName("lock name of lock_for prefix \"" + prefix + "\"", lock,
                             options_.max_key_bytes);
          !s.ok()) {
        return s;
      }
    }
    auto db = fencedstore::OpenConnection(options_, false);
    if (!db.ok()) return db.status();
    sqlite3* w = db->get();
    auto txn = sqlite::TxnStatements::Prepare(w, sqlite::TxnMode::kImmediate,
                                              "the store database \"" + options_.path + "\"");
    if (!txn.ok()) return txn.status();
    if (auto s = fencedstore::Migrate(w, *txn, options_.path); !s.ok()) return s;
    return writer_.Start(std::move(db).value(), std::move(txn).value());
  }

  void Submit(WriteRequest request, WriteCallback done) override {
    writer_.Submit(std::move(request), std::move(done));
  }

  Result<StoredObject> Get(std::string_view key) override { return readers_.Get(key); }

  Result<std::optional<FencingToken>> Highest(std::string_view lock) override {
    return readers_.Highest(lock);
  }

  Result<std::optional<FenceState>> Fence(std::string_view lock) override {
    return readers_.Fence(lock);
  }

  bool requires_service() const override { return options_.require_service; }

  Result<Decision> SetFence(std::string_view lock, FencingToken highest, std::string_view principal,
                            bool unbind_service) override {
    if (auto s = CheckName("lock name", lock, options_.max_key_bytes); !s.ok()) return s;
    std::promise<Result<Decision>> promise;
    auto future = promise.get_future();
    writer_.SetFence(std::string(lock), highest, std::string(principal), unbind_service,
                     [&promise](Result<Decision> d) { promise.set_value(std::move(d)); });
    return future.get();
  }

  Result<std::vector<Decision>> History(std::size_t limit) override {
    return readers_.History(limit);
  }

  StoreStats Stats() const override { return writer_.Stats(); }

  Status Close() override {
    if (!writer_.Stop()) return Status::Ok();
    readers_.Close();
    writer_.CloseDatabase();
    return Status::Ok();
  }

 private:
  StoreOptions options_;
  Clock* clock_;
  fencedstore::Writer writer_;
  fencedstore::ReaderPool readers_;
};

}  // namespace

Result<std::unique_ptr<FencedStore>> FencedStore::Open(StoreOptions options) {
  if (options.path.empty()) {
    return Status::InvalidArgument("no database path given; set StoreOptions::path");
  }
  auto store = std::make_unique<SqliteStore>(std::move(options));
  if (auto s = store->Init(); !s.ok()) return s;
  return std::unique_ptr<FencedStore>(std::move(store));
}

Result<WriteReceipt> FencedStore::Write(WriteRequest request) {
  std::promise<Result<WriteReceipt>> promise;
  auto future = promise.get_future();
  Submit(std::move(request),
         [&promise](Result<WriteReceipt> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<WriteReceipt> FencedStore::Put(std::string_view lock, FencingToken token,
                                      std::string_view key, std::string_view value) {
  std::promise<Result<WriteReceipt>> promise;
  auto future = promise.get_future();
  Submit(WriteRequest{WriteRequest::Kind::kPut, std::string(lock), token, std::string(key),
                      std::string(value)},
         [&promise](Result<WriteReceipt> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<WriteReceipt> FencedStore::Delete(std::string_view lock, FencingToken token,
                                         std::string_view key) {
  std::promise<Result<WriteReceipt>> promise;
  auto future = promise.get_future();
  Submit(WriteRequest{WriteRequest::Kind::kDelete, std::string(lock), token, std::string(key), {}},
         [&promise](Result<WriteReceipt> r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace fencekit
