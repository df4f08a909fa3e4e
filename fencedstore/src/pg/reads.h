// The PostgreSQL store's reads, on a pool of connections of their own (READ COMMITTED: a read
// sees every committed write). Private to fencedstore.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "store_engine.h"
#include "fencekit/common/mutex.h"
#include "pg/connection.h"

namespace fencekit::fencedstore {

// A read borrows an idle connection, or makes one, and gives it back afterwards; at most 8 stay
// open. A pooled connection found lost (after a failover, say) is replaced once.
// Thread safety: safe for concurrent use; each read has a connection to itself.
class PostgresReads final : public Reads {
 public:
  // REQUIRES: `options` outlives this.
  explicit PostgresReads(const StoreOptions& options) : options_(options) {}

  Result<StoredObject> Get(std::string_view key) override;
  Result<ObjectPage> List(const KeyRange& range, std::size_t limit) override;
  Result<std::optional<FenceState>> Fence(std::string_view lock) override;
  Result<std::vector<Decision>> History(std::size_t limit) override;
  void Close() override;

 private:
  // Runs `command` on a borrowed connection; its one result.
  Result<pg::ResultPtr> Run(const pg::Command& command);

  const StoreOptions& options_;
  Mutex mu_;
  std::vector<std::unique_ptr<pg::Conn>> idle_ FENCEKIT_GUARDED_BY(mu_);
  bool closed_ FENCEKIT_GUARDED_BY(mu_) = false;
};

}  // namespace fencekit::fencedstore
