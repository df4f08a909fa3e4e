#include "sqlite/wake_board.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>

namespace fencekit::lockclient {
namespace {

constexpr off_t kBytes = WakeBoard::kSlots * sizeof(std::uint32_t);

}  // namespace

WakeBoard::WakeBoard(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  struct stat st {};
  // Only ever grown: another process may have it mapped, and a shrunk mapping faults.
  if (::fstat(fd, &st) == 0 && (st.st_size >= kBytes || ::ftruncate(fd, kBytes) == 0)) {
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) words_ = static_cast<std::uint32_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file
}

WakeBoard::~WakeBoard() {
  if (words_ != nullptr) ::munmap(words_, kBytes);
}

std::uint32_t WakeBoard::Seen(std::uint32_t slot) const {
  if (words_ == nullptr) return 0;
  return std::atomic_ref<std::uint32_t>(words_[slot % kSlots]).load(std::memory_order_acquire);
}

void WakeBoard::Wait(std::uint32_t slot, std::uint32_t seen,
                     std::chrono::microseconds max_wait) const {
  auto us = std::clamp<std::int64_t>(max_wait.count(), 0, 60'000'000);
  if (words_ == nullptr) {
    ::usleep(static_cast<useconds_t>(std::min<std::int64_t>(us, 10'000)));
    return;
  }
  timespec timeout{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
  // Shared (not FUTEX_PRIVATE): the word lives in a file mapping that other processes share.
  // Returns at once when the word is no longer `seen`; EINTR and timeouts are fine.
  (void)::syscall(SYS_futex, &words_[slot % kSlots], FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

void WakeBoard::Wake(std::uint32_t slot) {
  if (words_ == nullptr) return;
  std::uint32_t* word = &words_[slot % kSlots];
  std::atomic_ref<std::uint32_t>(*word).fetch_add(1, std::memory_order_release);
  (void)::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace fencekit::lockclient
