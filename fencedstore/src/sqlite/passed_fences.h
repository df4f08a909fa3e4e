// The fences one SQLite transaction has let writes through, for the writes after them: a write
// of the same lock at the same token, with the same service or none, would pass the fence's
// statement again and change nothing, so the engine skips it (SqliteEngine::Decide). Most of a
// group commit's writes come from few holders, each at its one token; a batch's writes all
// share one grant. Private to fencedstore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fencekit::fencedstore {

// Thread safety: none; the writer thread's alone.
class PassedFences {
 public:
  // At most this many locks are remembered; a write of another lock runs the statement.
  static constexpr std::size_t kMaxLocks = 16;

  // Forgets every fence: when a transaction begins, and when a savepoint is rolled back (the
  // fences it moved are back where they were).
  void Clear() { fences_.clear(); }
  // Whether a write of `lock` at `token` passed this transaction's fence with `service`, or a
  // write with no `service` passed it at that token.
  bool Passed(std::string_view lock, std::int64_t token, std::string_view service) const;
  // A write of `lock` at `token` with `service` (maybe none) passed the fence, which now stands
  // at `token`, bound to `service` when the write named one.
  void Remember(std::string_view lock, std::int64_t token, std::string_view service);

 private:
  struct Fence {
    std::string lock;
    std::int64_t token;
    std::string service;  // the one a write named; empty when none did
  };
  std::vector<Fence> fences_;
};

}  // namespace fencekit::fencedstore
