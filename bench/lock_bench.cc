// Lock client cycle rates. One line of output per run: "NAME cycles_per_s".
//   lock_bench floor PORT SECONDS          two bare EVALSHA round trips per cycle (hiredis)
//   lock_bench cycle URI SECONDS           fencekit TryAcquire + Release, one client
//   lock_bench contend URI SECONDS         one of several contending processes: Acquire +
//                                          Release of the same lock; prints its acquisitions/s
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fencekit/lockclient/lock_client.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The floor: what any Redis lock with a token must at least do per cycle.
int Floor(int port, double secs) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err) return 1;
  const char* acquire =
      "if redis.call('set',KEYS[1],ARGV[1],'NX','PX',ARGV[2]) then "
      "return redis.call('incr',KEYS[2]) else return 0 end";
  const char* release =
      "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 "
      "end";
  auto load = [&](const char* script) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", script));
    std::string sha = r->str;
    freeReplyObject(r);
    return sha;
  };
  std::string acq = load(acquire), rel = load(release);
  long cycles = 0;
  auto start = Clock::now();
  while (Seconds(start) < secs) {
    std::string owner = "owner-" + std::to_string(cycles);
    freeReplyObject(redisCommand(c, "EVALSHA %s 2 floor:lock floor:token %s 10000", acq.c_str(),
                                 owner.c_str()));
    freeReplyObject(redisCommand(c, "EVALSHA %s 1 floor:lock %s", rel.c_str(), owner.c_str()));
    ++cycles;
  }
  std::printf("floor %.0f\n", cycles / Seconds(start));
  redisFree(c);
  return 0;
}

int Cycle(const char* uri, double secs, bool contend) {
  auto client = fencekit::LockClient::Open(uri);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  long cycles = 0, failures = 0;
  auto start = Clock::now();
  while (Seconds(start) < secs) {
    auto lease = contend ? (*client)->Acquire("bench", Clock::now() + std::chrono::seconds(10))
                         : (*client)->TryAcquire("bench");
    if (!lease.ok()) {
      ++failures;
      continue;
    }
    if (!(*client)->Release(*lease).ok()) ++failures;
    ++cycles;
  }
  std::printf("%s %.0f failures=%ld\n", contend ? "contend" : "cycle", cycles / Seconds(start),
              failures);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: lock_bench floor PORT SECONDS | cycle URI SECONDS | contend URI SECONDS\n");
    return 2;
  }
  double secs = std::atof(argv[3]);
  if (std::strcmp(argv[1], "floor") == 0) return Floor(std::atoi(argv[2]), secs);
  if (std::strcmp(argv[1], "cycle") == 0) return Cycle(argv[2], secs, false);
  if (std::strcmp(argv[1], "contend") == 0) return Cycle(argv[2], secs, true);
  return 2;
}
