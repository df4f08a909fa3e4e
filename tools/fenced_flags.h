// fenced's command line: its flags, and the server's and the store's options they make.
#pragma once

#include <boost/program_options.hpp>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/fencedstore/store.h"
#include "fencekit/httpapi/server.h"

namespace fencekit::fenced {

// The flags as given (bound by Describe).
struct Flags {
  std::string listen, db, durability, max_body, max_header, read_timeout, write_timeout,
      drain_timeout, event_heartbeat, health_timeout, max_response_memory;
  std::size_t max_event_streams = 0, max_event_streams_per_principal = 0;
  std::string port_file, verify_with, auth_file, tls_cert, tls_key;
  std::vector<std::string> lock_for;
  unsigned threads = 0;
  std::size_t max_connections = 0;
  std::size_t max_batch = 0, history = 0;
  std::string batch_linger;
  bool no_fencing = false, strict = false, require_service = false, insecure_no_auth = false,
       access_log = false;
};

// The options fenced takes, with their help and defaults, bound to `flags`' members.
boost::program_options::options_description Describe(Flags& flags);

// The server's options from the flags; kInvalidArgument says which flag is wrong and how.
Result<ServerOptions> ServerOptionsFrom(const Flags& flags);
// The store's options from the flags (all but --verify-with, which needs a lock client);
// kInvalidArgument says which flag is wrong and how.
Result<StoreOptions> StoreOptionsFrom(const Flags& flags);

}  // namespace fencekit::fenced
