// The parent's side of one demo client: a child process running this binary with --role client
// (client_role.h), driven one command line at a time.
#pragma once

#include <boost/json/object.hpp>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/procutil/child_process.h"

namespace fencekit::demo {

// Thread safety: one thread at a time.
class Client {
 public:
  // Starts `argv` with its stdin and stdout piped and waits for its ready line. A failed start
  // shows in every Answer().
  explicit Client(const std::vector<std::string>& argv);

  // Sends one command line without waiting for its answer.
  void Send(const std::string& line);
  // Sends one command line and returns its answer.
  boost::json::object Ask(const std::string& line);
  // Reads the next answer; {"ok":false,"message"} when the client did not start or died.
  boost::json::object Answer();
  // Sends "exit" and waits for the process to end.
  void Stop();
  void Signal(int sig);

 private:
  procutil::ChildProcess process_;
  Status started_;
};

}  // namespace fencekit::demo
