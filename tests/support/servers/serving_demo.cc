#include "support/servers/serving_demo.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "support/matching.h"

namespace fencekit::testing {

using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ServingDemo::ServingDemo(const std::string& binary, const TempDir& dir,
                         std::vector<std::string> args)
    : output_(dir.File("out")) {
  args.insert(args.begin(), {binary, "--serve", "--color", "never"});
  if (Status s = process_.Start({.argv = args, .output_path = output_}); !s.ok()) {
    ADD_FAILURE() << s.ToString();
    return;
  }
  const std::string where =
      "Open (http://127\\.0\\.0\\.1:\\d+/) in a browser[\\s\\S]*fenced \\(the store\\) listens "
      "at http://127\\.0\\.0\\.1:(\\d+);";
  std::vector<std::string> m;
  std::string out;
  if (!WaitFor(
          [&] {
            out = Output();
            m = Search(out, where);
            return !m.empty();
          },
          30s)) {
    ADD_FAILURE() << "fencekit-demo --serve did not say where to watch: " << out;
    return;
  }
  page_url_ = m[1];
  fenced_port_ = static_cast<std::uint16_t>(std::stoi(m[2]));
}

std::string ServingDemo::WaitForOutput(const std::string& text) {
  std::string out;
  EXPECT_TRUE(WaitFor(
      [&] {
        out = Output();
        return out.find(text) != std::string::npos;
      },
      30s))
      << "no \"" << text << "\" in: " << out;
  return out;
}

bool ServingDemo::Interrupt() {
  process_.Signal(SIGINT);
  const pid_t pid = process_.pid();
  // Exited, not yet reaped (WNOWAIT): the ChildProcess reaps it and so knows it is gone.
  if (!WaitFor(
          [&] {
            siginfo_t info{};
            return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                   info.si_pid == pid;
          },
          10s)) {
    ADD_FAILURE() << "fencekit-demo did not stop on Ctrl-C";
    return false;
  }
  const int status = process_.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace fencekit::testing
