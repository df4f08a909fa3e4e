// FencedStore on either engine: it opens the database (a SQLite file, or a PostgreSQL database
// for a postgresql:// path), and routes writes to the single writer (writer.h) and reads to the
// engine's reads (store_engine.h).
#include "fencekit/fencedstore/store.h"

#include <future>
#include <utility>

#include "store_engine.h"
#include "fencekit/common/names.h"
#include "pg/connection.h"
#include "writer.h"

namespace fencekit {
namespace fencedstore {

KeyRange ListRange(std::string_view prefix, std::string_view after) {
  KeyRange range;
  if (after < prefix) {
    range.from = std::string(prefix);
  } else {
    range.from = std::string(after);
    range.inclusive = false;
  }
  // The first byte string above every key with the prefix: the prefix without its trailing
  // 0xFF bytes, its last byte plus one. None when the prefix is empty or all 0xFF.
  std::string to(prefix);
  while (!to.empty() && static_cast<unsigned char>(to.back()) == 0xFF) to.pop_back();
  if (!to.empty()) {
    to.back() = static_cast<char>(static_cast<unsigned char>(to.back()) + 1);
    range.to = std::move(to);
  }
  return range;
}

}  // namespace fencedstore

namespace {

using fencedstore::Storage;

class Store final : public FencedStore {
 public:
  explicit Store(StoreOptions o)
      : options_(std::move(o)),
        clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
        writer_(options_, clock_) {}

  ~Store() override { (void)Close(); }

  Status Init() {
    if (options_.max_batch == 0) options_.max_batch = 1;
    for (const auto& [prefix, lock] : options_.lock_for) {
      if (auto s = CheckName("lock name of lock_for prefix \"" + prefix + "\"", lock,
                             options_.max_key_bytes);
          !s.ok()) {
        return s;
      }
    }
    auto storage = fencedstore::IsPostgresUri(options_.path)
                       ? fencedstore::OpenPostgresStorage(options_)
                       : fencedstore::OpenSqliteStorage(options_);
    if (!storage.ok()) return storage.status();
    reads_ = std::move(storage->reads);
    writer_.Start(std::move(storage->engine));
    return Status::Ok();
  }

  void Submit(WriteRequest request, WriteCallback done) override {
    writer_.Submit(std::move(request), std::move(done));
  }

  void SubmitBatch(BatchRequest batch, BatchCallback done) override {
    writer_.SubmitBatch(std::move(batch), std::move(done));
  }

  Result<ObjectPage> List(std::string_view prefix, std::string_view after,
                          std::size_t limit) override {
    if (limit < 1 || limit > kMaxListLimit) {
      return Status::InvalidArgument("a listing's limit must be 1 to " +
                                     std::to_string(kMaxListLimit) + ", not " +
                                     std::to_string(limit));
    }
    if (prefix.size() > options_.max_key_bytes || after.size() > options_.max_key_bytes) {
      return Status::InvalidArgument("a listing's prefix and cursor are keys: at most " +
                                     std::to_string(options_.max_key_bytes) + " bytes");
    }
    if (reads_ == nullptr) return Status::Unavailable("the store is closed");
    return reads_->List(fencedstore::ListRange(prefix, after), limit);
  }

  Result<StoredObject> Get(std::string_view key) override {
    if (auto s = CheckName("key", key, options_.max_key_bytes); !s.ok()) return s;
    if (reads_ == nullptr) return Status::Unavailable("the store is closed");
    return reads_->Get(key);
  }

  Result<std::optional<FencingToken>> Highest(std::string_view lock) override {
    auto fence = Fence(lock);
    if (!fence.ok()) return fence.status();
    if (!fence->has_value()) return std::optional<FencingToken>();
    return std::optional<FencingToken>((*fence)->highest);
  }

  Result<std::optional<FenceState>> Fence(std::string_view lock) override {
    if (auto s = CheckName("lock name", lock, options_.max_key_bytes); !s.ok()) return s;
    if (reads_ == nullptr) return Status::Unavailable("the store is closed");
    return reads_->Fence(lock);
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
    if (reads_ == nullptr) return Status::Unavailable("the store is closed");
    return reads_->History(limit);
  }

  Status CheckWritable() override {
    std::promise<Status> promise;
    auto future = promise.get_future();
    writer_.ProbeCommit([&promise](Status s) { promise.set_value(std::move(s)); });
    return future.get();
  }

  StoreStats Stats() const override { return writer_.Stats(); }

  Status Close() override {
    if (!writer_.Stop()) return Status::Ok();
    if (reads_ != nullptr) reads_->Close();
    return Status::Ok();
  }

 private:
  StoreOptions options_;
  Clock* clock_;
  fencedstore::Writer writer_;
  // Set by Init; reads after Close fail in it with kUnavailable.
  std::unique_ptr<fencedstore::Reads> reads_;
};

}  // namespace

Result<std::unique_ptr<FencedStore>> FencedStore::Open(StoreOptions options) {
  if (options.path.empty()) {
    return Status::InvalidArgument(
        "no database given; set StoreOptions::path to a SQLite file or a postgresql:// URI");
  }
  auto store = std::make_unique<Store>(std::move(options));
  if (auto s = store->Init(); !s.ok()) return s;
  return std::unique_ptr<FencedStore>(std::move(store));
}
std::string DescribeDatabase(std::string_view path) {
  return fencedstore::IsPostgresUri(path) ? fencedstore::pg::RedactUri(path) : std::string(path);
}

Result<WriteReceipt> FencedStore::Write(WriteRequest request) {
  std::promise<Result<WriteReceipt>> promise;
  auto future = promise.get_future();
  Submit(std::move(request),
         [&promise](Result<WriteReceipt> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<std::vector<WriteReceipt>> FencedStore::WriteBatch(BatchRequest batch) {
  std::promise<Result<std::vector<WriteReceipt>>> promise;
  auto future = promise.get_future();
  SubmitBatch(std::move(batch),
              [&promise](Result<std::vector<WriteReceipt>> r) { promise.set_value(std::move(r)); });
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
