// The client role of fencekit-demo (`--role client`): one client process of the demo, driven by
// the parent through its stdin and stdout.
//
// First the client answers {"ok":true,"ready":true} once its lock and store clients are open
// ({"ok":false,"message"} and exit 1 when they cannot be). Then commands, one per line, each
// but "exit" answered by one JSON object on one line:
//   acquire      {"ok","token","owner"}; waits up to 30 s for the lock
//   read         {"ok","value","found"}: kKey as the store has it ("" when absent); the client
//                keeps it for its next deposit
//   deposit N    {"ok","token","lease_lost","value"}, plus "stale","wrong_service","highest",
//                "message" when not ok: the balance last read plus the client's deposit of N
//                (balance.h), a fenced put under kKey with the held lease's token. With
//                `two_step` the put is followed by a put of the token under kHighestKey
//   check        {"ok","passed","highest"}: with `two_step`, the store's own check done apart
//                from the write: reads kHighestKey (0 when absent) and compares the held token
//   exit         releases the lease and ends the process
// A command that fails before reaching the store answers {"ok":false,"message"}.
#pragma once

#include <chrono>
#include <string>

namespace fencekit::demo {

// The lock both clients contend for, and the key they write under it.
inline constexpr const char* kLock = "demo-lock";
inline constexpr const char* kKey = "shared-record";
// check-then-write: where the two-step store keeps the highest token it has seen.
inline constexpr const char* kHighestKey = "shared-record.highest-token";

struct ClientOptions {
  std::string name, locks, store_url;
  std::chrono::milliseconds ttl{1000};
  bool sequential = false;  // Redlock: ask the nodes one at a time, stop at a majority
  bool two_step = false;    // check-then-write
};

// Serves commands until "exit" or the end of stdin, then releases a held lease. Returns the
// process's exit code: 1 when the lock service or the store cannot be opened, else 0.
int RunClient(const ClientOptions& o);

}  // namespace fencekit::demo
