#include "scenario/client_process.h"

#include <boost/json/parse.hpp>

namespace json = boost::json;

namespace fencekit::demo {

Client::Client(const std::vector<std::string>& argv)
    : started_(process_.Start({.argv = argv, .pipe_stdio = true})) {
  // The client says it is ready once its lock and store clients are open; until then a
  // scenario must not disturb the lock service (Open fails at once when it is unreachable).
  auto ready = Answer();
  if (started_.ok() && !ready["ok"].as_bool()) {
    auto* m = ready.if_contains("message");
    started_ = Status::Unavailable(m != nullptr && m->is_string() ? std::string(m->as_string())
                                                                  : "the client did not start");
  }
}

void Client::Send(const std::string& line) { process_.Send(line); }

json::object Client::Ask(const std::string& line) {
  Send(line);
  return Answer();
}

json::object Client::Answer() {
  if (!started_.ok()) return json::object{{"ok", false}, {"message", started_.message()}};
  boost::system::error_code ec;
  auto v = json::parse(process_.ReadLine().value_or(""), ec);
  if (ec || !v.is_object()) return json::object{{"ok", false}, {"message", "client died"}};
  return v.as_object();
}

void Client::Stop() {
  if (process_.pid() > 0) {
    Send("exit");
    process_.Wait();
  }
}

void Client::Signal(int sig) { process_.Signal(sig); }

}  // namespace fencekit::demo
