// Cross-process wake-ups for the embedded SQLite lock service: a small shared file of
// sequence counters ("<database>-wake", mapped into every process that uses the database) on
// which waiters sleep with a futex. A release wakes only the waiter it handed the lock to (its
// ticket's slot) and those waiting for any release (slot kAnyRelease), not every waiter of
// every lock: on a busy machine, waking the whole line for each handover costs more than the
// commit.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fencekit::lockclient {

// Thread safety: safe for concurrent use by any number of threads and processes.
class WakeBoard {
 public:
  // Slots: kAnyRelease, kCommitted (a write transaction of the database committed), then one
  // per ticket modulo the rest (a shared slot only wakes a waiter early; it looks at the
  // database and sleeps again).
  static constexpr std::uint32_t kAnyRelease = 0;
  static constexpr std::uint32_t kCommitted = 1;
  static constexpr std::uint32_t kSlots = 1024;

  // Opens (creating, or growing to the board's size) the file at `path`. Where it cannot be
  // mapped, Wait sleeps at most 10 ms instead, so waiters poll.
  explicit WakeBoard(const std::string& path);
  ~WakeBoard();
  WakeBoard(const WakeBoard&) = delete;
  WakeBoard& operator=(const WakeBoard&) = delete;

  static std::uint32_t SlotOfTicket(std::int64_t ticket) {
    return ticket <= 0 ? kAnyRelease : 2 + static_cast<std::uint32_t>(ticket % (kSlots - 2));
  }

  // The slot's counter. Read it before looking at the database, then Wait with it: a wake
  // between the look and the Wait is not missed.
  std::uint32_t Seen(std::uint32_t slot) const;
  // Returns when `slot` was woken after its counter read `seen`, or after `max_wait` (at most a
  // minute), or spuriously.
  void Wait(std::uint32_t slot, std::uint32_t seen, std::chrono::microseconds max_wait) const;
  // Wakes everyone waiting on `slot`. Call after the commit that the waiters should see.
  void Wake(std::uint32_t slot);

 private:
  std::uint32_t* words_ = nullptr;  // kSlots counters in the shared mapping, or null
};

}  // namespace fencekit::lockclient
