// ResponseBudget: the memory that answers written but not yet taken by their clients may hold,
// summed over every connection (ServerOptions::max_response_memory). A client that asks for a
// listing and never reads it holds the answer until the write timeout; without a global bound,
// many such clients hold connections x answer size.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace fencekit::httpapi {

// Thread safety: safe for concurrent use.
class ResponseBudget {
 public:
  // Answers of at most this many bytes are not charged: a connection's own bound covers them
  // (docs/security.md), and a full budget must not stop small answers (a write's receipt, a
  // probe).
  static constexpr std::size_t kUncharged = 64 << 10;

  explicit ResponseBudget(std::size_t limit) : limit_(limit) {}

  // Charges `bytes` and returns true when they fit in what is left; false (nothing charged)
  // when not. An answer larger than the whole budget never fits.
  bool TryCharge(std::size_t bytes) {
    std::size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || used > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Charges `bytes` whatever is left: for the part of an already decided answer beyond what
  // was reserved for it (a bound that held would leave none).
  void Charge(std::size_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  // Returns what a TryCharge that succeeded took.
  void Release(std::size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  std::size_t limit() const { return limit_; }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

// The message of the 503 busy an answer gets when the budget cannot hold it.
inline std::string AnswerBudgetFull(std::size_t limit) {
  return "fenced holds as many answers that clients have not read yet as it allows (fenced "
         "--max-response-memory " +
         std::to_string(limit) +
         " bytes); retry in a second, or ask for less (a smaller limit, a smaller batch)";
}

}  // namespace fencekit::httpapi
