// fencectl's commands, each called by main with the arguments after its name (and the options
// given before it): each returns the process's exit code (fencectl_cli.h).
#pragma once

#include <boost/json/object.hpp>
#include <boost/program_options.hpp>
#include <memory>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/lockclient/lock_client.h"

namespace fencekit::fencectl {

// Lock commands (fencectl_locks.cc).
int Acquire(const std::vector<std::string>& args);
// `command`: "release" or "extend".
int ReleaseOrExtend(const std::string& command, const std::vector<std::string>& args);
int Inspect(const std::vector<std::string>& args);
// Exit 0 when --token is the current holder's, kExitStale when not.
int CheckToken(const std::vector<std::string>& args);

// fencectl run (fencectl_run.cc).
int Run(const std::vector<std::string>& args);

// Store commands (fencectl_store.cc).
int Put(const std::vector<std::string>& args);
int Get(const std::vector<std::string>& args);
int Delete(const std::vector<std::string>& args);
int Batch(const std::vector<std::string>& args);
int List(const std::vector<std::string>& args);
int Fence(const std::vector<std::string>& args);
int History(const std::vector<std::string>& args);

// What the lock commands and run share (fencectl_locks.cc).
// The lock service of --locks, its leases `ttl` long.
Result<std::unique_ptr<LockClient>> OpenLocks(const boost::program_options::variables_map& vm,
                                              std::chrono::milliseconds ttl);
// --locks URI and the lock NAME.
void AddLockOptions(boost::program_options::options_description& desc);
// A lease as fencectl prints it.
boost::json::object LeaseJson(const Lease& lease);
struct Granted {
  std::unique_ptr<LockClient> client;
  Lease lease;
};
// Opens the lock service and acquires lock NAME for --ttl, waiting up to --wait (0s: one
// attempt).
Result<Granted> AcquireFromOptions(const boost::program_options::variables_map& vm);

}  // namespace fencekit::fencectl
