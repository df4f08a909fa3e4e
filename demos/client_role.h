// The client role of fencekit-demo (`--role client`): one client process of the demo, driven by
// the parent through its stdin and stdout.
//
// First the client answers {"ok":true,"ready":true} once its lock and store clients are open
// ({"ok":false,"message"} and exit 1 when they cannot be). Then commands, one per line, each
// but "exit" answered by one JSON object on one line:
//   acquire      {"ok","token","owner"}; waits up to 30 s for the lock
//   write VALUE  {"ok","token","lease_lost"}, plus "stale","highest","message" when not ok; a
//                fenced put of VALUE under kKey with the held lease's token
//   read         {"ok","value","token"}: kKey as the store has it
//   exit         releases the lease and ends the process
// A command that fails before reaching the store answers {"ok":false,"message"}.
#pragma once

#include <chrono>
#include <string>

namespace fencekit::demo {

// The lock both clients contend for, and the key they write under it.
inline constexpr const char* kLock = "demo-lock";
inline constexpr const char* kKey = "shared-record";

// Serves commands until "exit" or the end of stdin, then releases a held lease. Returns the
// process's exit code: 1 when the lock service or the store cannot be opened, else 0.
int RunClient(const std::string& name, const std::string& locks, const std::string& store_url,
              std::chrono::milliseconds ttl, bool sequential);

}  // namespace fencekit::demo
