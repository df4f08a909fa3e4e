// The SQLite store's reads on a pool of read-only connections, which in WAL mode run beside the
// writer and never wait for it. Private to fencedstore.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "store_engine.h"
#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "fencekit/fencedstore/store.h"
#include "fencekit/fencedstore/types.h"

namespace fencekit::fencedstore {

// A read borrows an idle connection, or opens one, and gives it back afterwards; at most 16
// stay open. Thread safety: safe for concurrent use; each read has a connection to itself.
class SqliteReads final : public Reads {
 public:
  // REQUIRES: `options` outlives the pool.
  explicit SqliteReads(const StoreOptions& options);
  ~SqliteReads() override;

  Result<StoredObject> Get(std::string_view key) override;
  Result<ObjectPage> List(const KeyRange& range, std::size_t limit) override;
  Result<std::optional<FenceState>> Fence(std::string_view lock) override;
  Result<std::vector<Decision>> History(std::size_t limit) override;
  // Closes the idle connections.
  void Close() override;

 private:
  struct Reader;  // a connection and its prepared statements

  // Runs `f` on a borrowed connection.
  template <typename F>
  auto WithReader(F&& f) -> decltype(f(std::declval<Reader&>()));
  Result<std::unique_ptr<Reader>> MakeReader();

  const StoreOptions& options_;
  Mutex mu_;
  std::vector<std::unique_ptr<Reader>> readers_ FENCEKIT_GUARDED_BY(mu_);
  bool closed_ FENCEKIT_GUARDED_BY(mu_) = false;
};

}  // namespace fencekit::fencedstore
