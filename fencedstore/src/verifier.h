// Verification on advance (StoreOptions::verify): asks the lock service whether a token is its
// current holder's, on a small pool of threads of its own, with one call per (lock, token)
// however many writes wait for the answer (single flight). Private to fencedstore.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fencekit/common/mutex.h"
#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "fencekit/fencedstore/store.h"

namespace fencekit::fencedstore {

// What the lock service said of one (lock, token): a verdict, or why it could not be asked
// (kTimeout). Shared by every write that waited for it.
using SharedVerdict = std::shared_ptr<const Result<TokenVerdict>>;

// Thread safety: safe for concurrent use. The continuations run on the pool's threads.
class Verifier {
 public:
  // Runs one waiting write once the verdict is known; must not block.
  using Continuation = std::function<void(SharedVerdict)>;

  // REQUIRES: `verify` is set and outlives this; threads >= 1.
  Verifier(const TokenVerifier& verify, unsigned threads, std::size_t max_queued);
  // Stop().
  ~Verifier();

  // The answer on (lock, token) when known: a flight finished whose resumed writes the writer
  // has not all processed yet. Null otherwise.
  SharedVerdict Answer(const std::string& lock, FencingToken token);
  // For a write that needs (lock, token) verified. When the answer is known, returns it and
  // drops `then`. Otherwise keeps `then`, to be called once with the answer, and returns null;
  // the call is started unless one for (lock, token) is under way. When too many calls wait,
  // returns a kTimeout answer at once.
  SharedVerdict Join(const std::string& lock, FencingToken token, Continuation then);
  // The writer has processed (committed or failed) one write resumed by the flight of
  // (lock, token); the flight's answer is forgotten after its last one.
  void Resumed(const std::string& lock, FencingToken token);

  std::uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

  // Stops asking: calls not started yet are answered kTimeout ("the store is closing") without
  // asking the lock service; running calls finish (within the lock client's own timeouts). Every
  // continuation runs. Later Joins answer kTimeout at once. Returns at once; idempotent.
  void BeginStop();
  // BeginStop, then joins the threads. Idempotent.
  void Stop();

 private:
  using Key = std::pair<std::string, std::int64_t>;
  struct Flight {
    std::vector<Continuation> waiters;  // until answered
    SharedVerdict answer;               // once answered
    std::size_t unprocessed = 0;        // resumed writes the writer has not processed yet
  };

  void Work();
  SharedVerdict Ask(const Key& key);
  static SharedVerdict Closing();

  const TokenVerifier& verify_;
  Mutex mu_;
  CondVar cv_;
  std::map<Key, Flight> flights_ FENCEKIT_GUARDED_BY(mu_);
  std::deque<Key> queue_ FENCEKIT_GUARDED_BY(mu_);  // flights not yet started
  std::size_t max_queued_;
  bool stopping_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::atomic<std::uint64_t> calls_{0}, failures_{0};
};

}  // namespace fencekit::fencedstore
