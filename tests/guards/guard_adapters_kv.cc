// The conformance suite's adapters of the key-value guards: Redis, etcd (the C++ API and the
// shell script) and fenced itself.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "fencekit/common/text.h"
#include "fencekit/common/token.h"
#include "fencekit/lockclient/etcd_guard.h"
#include "fencekit/procutil/mariadb_server.h"
#include "fencekit/procutil/postgres_server.h"
#include "support/servers/etcd_server.h"
#include "support/matching.h"
#include "support/servers/redis_server.h"
#include "support/test_support.h"

#include "guards/guard_adapter.h"

namespace fencekit::guards {
namespace {

namespace json = boost::json;
using testing::TempDir;

// --- Redis: FCALL fencekit_set (fencedstore/lua/fencekit.lua) on a redis-server of its own
// that keeps every write (appendfsync always); the fence key is the lock name.
class RedisGuard final : public Guard {
 public:
  explicit RedisGuard(const std::string& dir)
      : server_(std::make_unique<testing::RedisServer>(testing::RedisServer::Persistent(dir))) {
    const std::string lua = ReadWholeFile(std::string(GUARD_LUA_DIR) + "/fencekit.lua");
    auto reply = Call({"FUNCTION", "LOAD", "REPLACE", lua});
    EXPECT_EQ(reply.first, "ok") << reply.second;
  }

  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool) override {
    auto [kind, text] = Call({"FCALL", "fencekit_set", "2", lock, "data:" + lock, token.bytes,
                              value});
    Answer a;
    a.detail = text;
    if (kind == "ok") a.outcome = Outcome::kAccepted;
    if (kind == "error" && text.starts_with("FENCE ")) a.outcome = Outcome::kStale;
    if (kind == "error" && text.starts_with("ERR fencekit:")) a.outcome = Outcome::kBad;
    return a;
  }
  std::optional<std::int64_t> Fence(const std::string& lock) override {
    auto [kind, text] = Call({"GET", lock});
    if (kind != "ok" || text.empty()) return std::nullopt;
    return std::stoll(text);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    auto [kind, text] = Call({"GET", "data:" + lock});
    if (kind != "ok" || text.empty()) return {};
    return {text};
  }
  Status Restart() override {
    server_->RestartKeepingData();
    // It answers LOADING until it has read its append-only file.
    if (!testing::WaitFor([&] { return Call({"PING"}).first == "ok"; })) {
      return Status::Unavailable("redis-server does not answer after its restart");
    }
    return Status::Ok();
  }
  // A function's writes (SET, DEL) cannot fail once its checks passed.
  bool CanFailAfterCheck() const override { return false; }
  std::string NamedAs() const override { return "fence key"; }

 private:
  // ("ok", the reply's text; "" for nil), or ("error", the error's text).
  std::pair<std::string, std::string> Call(const std::vector<std::string>& args) {
    redisContext* c = redisConnect("127.0.0.1", server_->port());
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    std::pair<std::string, std::string> out{"none", c->errstr};
    if (r != nullptr) {
      out.first = r->type == REDIS_REPLY_ERROR ? "error" : "ok";
      out.second = r->str != nullptr ? std::string(r->str, r->len) : "";
      freeReplyObject(r);
    }
    redisFree(c);
    return out;
  }

  std::unique_ptr<testing::RedisServer> server_;
};

// etcd's values for a fence, and a key's value, through the gateway of `port`.
std::optional<std::string> EtcdValue(std::uint16_t port, const std::string& key) {
  testing::RawConnection conn(port);
  conn.Send(testing::Request("POST", "/v3/kv/range", {{"Content-Type", "application/json"}},
                             R"({"key":")" + Base64Encode(key) + R"("})"));
  boost::system::error_code ec;
  auto v = json::parse(conn.Read().body, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto* kvs = v.as_object().if_contains("kvs");
  if (kvs == nullptr || !kvs->is_array() || kvs->as_array().empty()) return std::nullopt;
  return Base64Decode(kvs->as_array()[0].as_object().at("value").as_string());
}

std::optional<std::int64_t> EtcdFence(std::uint16_t port, const std::string& key) {
  auto v = EtcdValue(port, key);
  if (!v) return std::nullopt;
  return std::stoll(*v);
}

// What the two etcd guards share: a one-member etcd of their own, the fence key the lock name
// and the data key "data:" and the name.
class EtcdBackedGuard : public Guard {
 public:
  EtcdBackedGuard() : etcd_(1) {}
  std::optional<std::int64_t> Fence(const std::string& lock) override {
    return EtcdFence(etcd_.client_port(0), lock);
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    auto v = EtcdValue(etcd_.client_port(0), "data:" + lock);
    if (!v) return {};
    return {*v};
  }
  Status Restart() override {
    etcd_.Kill(0);
    return etcd_.Restart(0);
  }
  std::string NamedAs() const override { return "fence key"; }

 protected:
  testing::EtcdCluster etcd_;
};

// --- etcd through fencekit::EtcdGuard (the C++ API; its token a FencingToken
// parsed from the text, as a caller would).
class EtcdApiGuard final : public EtcdBackedGuard {
 public:
  EtcdApiGuard() {
    auto guard = EtcdGuard::Open(etcd_.uri());
    EXPECT_TRUE(guard.ok()) << guard.status().ToString();
    if (guard.ok()) guard_ = std::move(guard).value();
  }
  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    Answer a;
    auto parsed = FencingToken::Parse(token.bytes);
    if (!parsed.ok()) {
      a.outcome = Outcome::kBad;
      a.detail = parsed.status().message();
      return a;
    }
    // A value over etcd's request limit (1.5 MiB): the transaction fails whole.
    const std::string data = fail_after ? std::string(1'600'000, 'v') : value;
    Status s = guard_->Put(lock, "data:" + lock, data, *parsed);
    a.detail = s.message();
    a.outcome = s.ok()                                      ? Outcome::kAccepted
                : s.code() == StatusCode::kStaleToken       ? Outcome::kStale
                : s.code() == StatusCode::kInvalidArgument && !fail_after ? Outcome::kBad
                                                                          : Outcome::kFailed;
    return a;
  }

 private:
  std::unique_ptr<EtcdGuard> guard_;
};

// --- etcd from a shell: fencedstore/etcd/fencekit-etcd-guard.sh (curl to the gateway).
class EtcdScriptGuard final : public EtcdBackedGuard {
 public:
  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool) override {
    Answer a;
    if (lock.find('\0') != std::string::npos || token.bytes.find('\0') != std::string::npos) {
      a.outcome = Outcome::kNotApplicable;  // argv cannot carry a NUL byte
      return a;
    }
    auto r = testing::RunCommand(
        {std::string(GUARD_ETCD_DIR) + "/fencekit-etcd-guard.sh", lock, token.bytes,
         "data:" + lock, value},
        {"ETCD_URL=http://127.0.0.1:" + std::to_string(etcd_.client_port(0))});
    a.detail = r.err;
    a.outcome = r.exit_code == 0   ? Outcome::kAccepted
                : r.exit_code == 3 ? Outcome::kStale
                : r.exit_code == 2 ? Outcome::kBad
                                   : Outcome::kFailed;
    while (!a.detail.empty() && a.detail.back() == '\n') a.detail.pop_back();
    return a;
  }
  bool TakesNul() const override { return false; }
  // The script's one transaction either writes both or nothing (EtcdApiGuard shows a failing
  // write); its own arguments cannot make the write fail.
  bool CanFailAfterCheck() const override { return false; }
};

// --- fenced itself: POST /v1/batch (the lock named in JSON, percent-encoded when it is not
// UTF-8; the token a JSON number when it is one, else a JSON string, which fenced refuses).
class FencedGuard final : public Guard {
 public:
  explicit FencedGuard(const std::string& dir) : db_(dir + "/fenced.db") {
    fenced_ = std::make_unique<testing::FencedProcess>(db_);
  }
  Answer Advance(const std::string& lock, const Token& token, const std::string& value,
                 bool fail_after) override {
    const std::string number = R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)";
    std::string token_json;
    if (!token.blob && testing::FullMatch(token.bytes, number)) {
      token_json = token.bytes;
    } else {
      token_json = json::serialize(json::value(JsonSafeText(token.bytes)));
    }
    bool encoded = false;
    const std::string name = JsonSafeText(lock, &encoded);
    std::string body = "{\"lock\":" + json::serialize(json::value(name)) +
                       (encoded ? ",\"lock_encoding\":\"percent\"" : "") +
                       ",\"token\":" + token_json + ",\"writes\":[{\"op\":\"put\",\"key\":\"" +
                       KeyOf(lock) + "\",\"value\":" + json::serialize(json::value(value)) + "}";
    // A second write whose version precondition fails: the batch is refused whole.
    if (fail_after) body += R"(,{"op":"put","key":"other","value":"x","if_version":999})";
    body += "]}";
    testing::RawConnection c(fenced_->port());
    c.Send(testing::Request("POST", "/v1/batch", {}, body));
    auto r = c.Read();
    Answer a;
    a.detail = std::to_string(r.status) + " " + r.body;
    a.outcome = r.status == 200                                       ? Outcome::kAccepted
                : r.status == 409 && r.body.find("\"stale_token\"") != std::string::npos
                    ? Outcome::kStale
                : r.status == 400 ? Outcome::kBad
                                  : Outcome::kFailed;
    return a;
  }
  std::optional<std::int64_t> Fence(const std::string& lock) override {
    testing::RawConnection c(fenced_->port());
    c.Send(testing::Request("GET", "/v1/fences/" + PercentEncode(lock)));
    auto r = c.Read();
    boost::system::error_code ec;
    auto v = json::parse(r.body, ec);
    if (ec || r.status != 200) return std::nullopt;
    const std::int64_t highest = v.as_object().at("highest").as_int64();
    if (highest == 0) return std::nullopt;
    return highest;
  }
  std::vector<std::string> Writes(const std::string& lock) override {
    testing::RawConnection c(fenced_->port());
    c.Send(testing::Request("GET", "/v1/objects/" + KeyOf(lock)));
    auto r = c.Read();
    if (r.status != 200) return {};
    return {r.body};
  }
  Status Restart() override {
    fenced_->Kill(SIGKILL);
    fenced_->Wait();
    fenced_ = std::make_unique<testing::FencedProcess>(db_);
    return fenced_->port() != 0 ? Status::Ok() : Status::Unavailable("fenced did not start");
  }
  // fenced answers 409 {"error":"stale_token","message",...,"highest":H} (docs/http-api.md).
  bool SaysFence() const override { return false; }
  std::optional<std::int64_t> HighestOf(const Answer& a) const override {
    boost::system::error_code ec;
    auto v = json::parse(a.detail.substr(a.detail.find('{')), ec);
    if (ec || !v.is_object() || !v.as_object().contains("highest")) return std::nullopt;
    return v.as_object().at("highest").to_number<std::int64_t>();
  }

 private:
  // A key per lock name (a name may be 1024 bytes, as long as a key may be).
  std::string KeyOf(const std::string& lock) {
    std::lock_guard<std::mutex> hold(mu_);
    auto [it, added] = keys_.emplace(lock, "d" + std::to_string(keys_.size()));
    return it->second;
  }

  std::string db_;
  std::unique_ptr<testing::FencedProcess> fenced_;
  std::mutex mu_;
  std::map<std::string, std::string> keys_;
};

}  // namespace

std::unique_ptr<Guard> MakeKvGuard(const std::string& name, const std::string& dir) {
  if (name == "redis") return std::make_unique<RedisGuard>(dir);
  if (name == "etcd_api") return std::make_unique<EtcdApiGuard>();
  if (name == "etcd_script") return std::make_unique<EtcdScriptGuard>();
  if (name == "fenced") return std::make_unique<FencedGuard>(dir);
  return nullptr;
}

}  // namespace fencekit::guards
