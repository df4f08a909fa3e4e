#include "random_id.h"

#include <pthread.h>
#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace fencekit::lockclient {
namespace {

// getrandom(2) costs ~2 us on a virtual machine, a few percent of a Redis lock cycle, and a grant
// draws two ids (the owner and the service-id candidate). So bytes are drawn 512 at a time into
// a per-thread pool. A forked child must never hand out its parent's bytes (two processes would
// then make the same owner), so a fork bumps a generation that empties every pool.
std::atomic<unsigned> fork_generation{0};
std::once_flag at_fork_registered;

struct Pool {
  unsigned char bytes[512];
  std::size_t used = sizeof bytes;  // empty
  unsigned generation = 0;
};

Status Fill(unsigned char* out, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = getrandom(out + got, size - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Internal("getrandom failed: cannot make a random id");
    }
    got += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> RandomHex128() {
  std::call_once(at_fork_registered, [] {
    pthread_atfork(nullptr, nullptr,
                   [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
  });
  thread_local Pool pool;
  unsigned generation = fork_generation.load(std::memory_order_relaxed);
  if (pool.generation != generation) {
    pool.used = sizeof pool.bytes;
    pool.generation = generation;
  }
  unsigned char bytes[16];
  if (pool.used + sizeof bytes > sizeof pool.bytes) {
    if (Status s = Fill(pool.bytes, sizeof pool.bytes); !s.ok()) return s;
    pool.used = 0;
  }
  std::memcpy(bytes, pool.bytes + pool.used, sizeof bytes);
  // Bytes handed out are wiped from the pool, so a later memory leak cannot reveal an owner.
  std::memset(pool.bytes + pool.used, 0, sizeof bytes);
  pool.used += sizeof bytes;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof bytes);
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace fencekit::lockclient
