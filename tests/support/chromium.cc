#include "support/chromium.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "fencekit/common/text.h"

extern char** environ;

namespace fencekit::testing {
namespace json = boost::json;

std::vector<std::string> ChromiumFlags(const std::string& profile_dir, int width, int height) {
  return {"--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--disable-dev-shm-usage",
          "--hide-scrollbars",
          "--user-data-dir=" + profile_dir,
          "--window-size=" + std::to_string(width) + "," + std::to_string(height)};
}

namespace {

// A copy of `fd` numbered 100 or above and closed on exec, so that dup2 onto 3 and 4 in the
// child cannot overwrite it.
int HighFd(int fd) {
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 100);
  close(fd);
  return high;
}

}  // namespace

Chromium::Chromium(const std::string& dir, int width, int height) {
  log_path_ = dir + "/chromium.log";
  int commands[2], replies[2];
  if (pipe(commands) != 0 || pipe(replies) != 0) {
    ADD_FAILURE() << "pipe: " << strerror(errno);
    return;
  }
  int child_in = HighFd(commands[0]), child_out = HighFd(replies[1]);
  to_browser_ = HighFd(commands[1]);
  from_browser_ = HighFd(replies[0]);
  std::vector<std::string> args = {"chromium"};
  for (auto& f : ChromiumFlags(dir + "/profile", width, height)) args.push_back(f);
  args.push_back("--remote-debugging-pipe");
  args.push_back("about:blank");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Its temporary files (a singleton lock folder it leaves when killed) in the test's folder.
  std::string tmpdir = "TMPDIR=" + dir;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).substr(0, 7) != "TMPDIR=") env.push_back(*e);
  }
  env.push_back(tmpdir.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The protocol's pipe: the browser reads commands on fd 3 and writes replies on fd 4.
  posix_spawn_file_actions_adddup2(&actions, child_in, 3);
  posix_spawn_file_actions_adddup2(&actions, child_out, 4);
  posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its helpers die with it
  posix_spawnattr_setpgroup(&attr, 0);
  int rc = posix_spawnp(&pid_, "chromium", &actions, &attr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(child_in);
  close(child_out);
  if (rc != 0) {
    pid_ = -1;
    ADD_FAILURE() << "cannot start chromium (install Debian's chromium; scripts/test does): "
                  << strerror(rc);
  }
}

Chromium::~Chromium() {
  if (pid_ > 0) {
    // Its profile is thrown away: no need to wait for an orderly exit (seconds).
    kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (to_browser_ >= 0) close(to_browser_);
  if (from_browser_ >= 0) close(from_browser_);
}

std::string Chromium::Log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
}

std::optional<json::object> Chromium::Call(std::string_view method, json::object params,
                                           std::chrono::milliseconds timeout, bool in_page) {
  if (pid_ <= 0) return std::nullopt;
  const std::int64_t id = next_id_++;
  json::object message{{"id", id}, {"method", method}, {"params", std::move(params)}};
  if (in_page && !session_.empty()) message["sessionId"] = session_;
  std::string bytes = json::serialize(message);
  bytes += '\0';
  for (std::string_view rest = bytes; !rest.empty();) {
    ssize_t n = write(to_browser_, rest.data(), rest.size());
    if (n <= 0) {
      ADD_FAILURE() << "chromium closed its pipe: " << Log();
      return std::nullopt;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::size_t end;
    while ((end = buffer_.find('\0')) != std::string::npos) {
      std::string one = buffer_.substr(0, end);
      buffer_.erase(0, end + 1);
      boost::system::error_code ec;
      json::value v = json::parse(one, ec);
      if (ec || !v.is_object()) continue;
      const auto& o = v.as_object();
      // Events (no id) and answers to earlier calls are not this call's.
      if (!o.contains("id") || o.at("id").to_number<std::int64_t>() != id) continue;
      if (o.contains("error")) {
        // An evaluation that a navigation (a reload) cut short is no failure: WaitUntil asks
        // the new page again.
        const std::string error = json::serialize(o.at("error"));
        if (error.find("Inspected target navigated or closed") == std::string::npos) {
          ADD_FAILURE() << method << ": " << error;
        }
        return std::nullopt;
      }
      return o.at("result").as_object();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{from_browser_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[65536];
    ssize_t n = read(from_browser_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

bool Chromium::Open(const std::string& url) {
  auto target = Call("Target.createTarget", {{"url", url}}, std::chrono::seconds(20), false);
  if (!target) {
    ADD_FAILURE() << "chromium did not open " << url << ": " << Log();
    return false;
  }
  auto attached =
      Call("Target.attachToTarget", {{"targetId", target->at("targetId")}, {"flatten", true}},
           std::chrono::seconds(10), false);
  if (!attached) return false;
  session_ = std::string(attached->at("sessionId").as_string());
  // A new tab holds about:blank, complete at once, until the navigation commits.
  return WaitUntil("location.href !== 'about:blank' && document.readyState === 'complete'",
                   std::chrono::seconds(20));
}

std::optional<json::value> Chromium::Evaluate(const std::string& expression,
                                              std::chrono::milliseconds timeout) {
  auto r =
      Call("Runtime.evaluate",
           {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, timeout);
  if (!r || r->contains("exceptionDetails")) return std::nullopt;
  const auto& result = r->at("result").as_object();
  if (!result.contains("value")) return json::value(nullptr);
  return result.at("value");
}

std::vector<std::string> Chromium::Texts(const std::string& selector) {
  auto v = Evaluate("[...document.querySelectorAll(" + json::serialize(json::value(selector)) +
                    ")].map(e => e.textContent)");
  std::vector<std::string> out;
  if (v && v->is_array()) {
    for (const auto& e : v->as_array()) out.emplace_back(e.as_string());
  }
  return out;
}

std::string Chromium::OverlappingTexts(const std::string& selector) {
  auto v = Evaluate(
      "(sel => {"
      "  const t = [...document.querySelectorAll(sel)]"
      "      .map(e => [e.textContent, e.getBBox()]);"
      "  const out = [];"
      "  for (let i = 0; i < t.length; ++i) for (let j = i + 1; j < t.length; ++j) {"
      "    const [a, b] = [t[i][1], t[j][1]];"
      "    if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height &&"
      "        b.y < a.y + a.height) out.push(t[i][0] + ' / ' + t[j][0]);"
      "  }"
      "  return out.join('; ');"
      "})(" +
      json::serialize(json::value(selector)) + ")");
  return v && v->is_string() ? std::string(v->as_string()) : "(not evaluated)";
}

bool Chromium::Reload() {
  // A mark on the page's window: the reloaded page has none.
  if (!Evaluate("window.fencekitBeforeReload = true")) return false;
  if (!Call("Page.reload", {}, std::chrono::seconds(10))) return false;
  return WaitUntil(
      "window.fencekitBeforeReload === undefined && document.readyState === 'complete'",
      std::chrono::seconds(20));
}

bool Chromium::WaitUntil(const std::string& expression, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto v = Evaluate(expression, std::chrono::seconds(5));
    if (v && v->is_bool() && v->as_bool()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string Chromium::Screenshot() {
  auto r = Call("Page.captureScreenshot", {{"format", "png"}}, std::chrono::seconds(20));
  if (!r) return "";
  return Base64Decode(r->at("data").as_string()).value_or("");
}

void SaveScreenshot(const std::string& png, const std::string& name) {
  const char* dir = std::getenv("FENCEKIT_SCREENSHOTS");
  if (dir == nullptr || *dir == '\0') return;
  std::ofstream f(std::string(dir) + "/" + name, std::ios::binary);
  f << png;
  if (!f) ADD_FAILURE() << "cannot write " << dir << "/" << name;
}

int DistinctImageBytes(const std::string& png) {
  std::string idat;
  for (std::size_t at = 8; at + 8 <= png.size();) {
    auto byte = [&](std::size_t i) { return std::uint32_t{static_cast<unsigned char>(png[i])}; };
    std::uint32_t len = byte(at) << 24 | byte(at + 1) << 16 | byte(at + 2) << 8 | byte(at + 3);
    if (png.compare(at + 4, 4, "IDAT") == 0) idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  std::string raw(64 << 20, '\0');
  uLongf raw_len = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_len,
                 reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK) {
    return 0;
  }
  std::set<unsigned char> seen(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(raw_len));
  return static_cast<int>(seen.size());
}

}  // namespace fencekit::testing
