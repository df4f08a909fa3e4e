#include "client_role.h"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <iostream>
#include <memory>

#include "fencekit/fencedstore/refusal.h"
#include "fencekit/fencing/fenced_writes.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/lock_client.h"

namespace json = boost::json;
using namespace std::chrono_literals;

namespace fencekit::demo {
namespace {

void Reply(const json::object& o) { std::cout << json::serialize(o) << std::endl; }

}  // namespace

int RunClient(const std::string& name, const std::string& locks, const std::string& store_url,
              std::chrono::milliseconds ttl, bool sequential) {
  auto client = LockClient::Open(locks, {.ttl = ttl, .redlock_sequential = sequential});
  auto store = StoreClient::Open(store_url, {.timeout = 30s});
  if (!client.ok() || !store.ok()) {
    Reply({{"ok", false},
           {"message", !client.ok() ? client.status().message() : store.status().message()}});
    return 1;
  }
  Reply({{"ok", true}, {"ready", true}});
  std::unique_ptr<HeldLock> held;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "acquire") {
      auto lease = (*client)->Acquire(kLock, std::chrono::steady_clock::now() + 30s);
      if (!lease.ok()) {
        Reply({{"ok", false}, {"message", lease.status().message()}});
        continue;
      }
      // No auto-renewal: a stop-the-world pause freezes a renewal thread too.
      held = std::make_unique<HeldLock>(**client, *lease, HeldLock::Options{});
      Reply({{"ok", true}, {"token", lease->token.value()}, {"owner", lease->owner}});
    } else if (line.starts_with("write ")) {
      if (!held) {
        Reply({{"ok", false}, {"message", "no lease"}});
        continue;
      }
      // The client still believes it holds the lock: it writes with the token it has.
      auto r = FencedPut(**store, *held, kKey, line.substr(6));
      json::object o{
          {"ok", r.ok()}, {"token", held->lease().token.value()}, {"lease_lost", held->lost()}};
      if (!r.ok()) {
        o["stale"] = r.status().IsStaleToken();
        o["wrong_service"] = r.status().IsWrongService();
        o["highest"] = HighestToken(r.status()).value_or(0);
        o["message"] = r.status().message();
      }
      Reply(o);
    } else if (line == "read") {
      auto r = (*store)->Get(kKey);
      Reply({{"ok", r.ok()},
             {"value", r.ok() ? r->value : ""},
             {"token", r.ok() ? r->token.value() : 0}});
    } else if (line == "exit") {
      break;
    }
  }
  if (held) (void)held->Release();
  return 0;
}

}  // namespace fencekit::demo
