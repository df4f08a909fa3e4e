#include "scenario/client_role.h"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <charconv>
#include <iostream>
#include <memory>

#include "scenario/balance.h"
#include "fencekit/fencedstore/refusal.h"
#include "fencekit/fencing/fenced_writes.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"

namespace json = boost::json;
using namespace std::chrono_literals;

namespace fencekit::demo {
namespace {

void Reply(const json::object& o) { std::cout << json::serialize(o) << std::endl; }

}  // namespace

int RunClient(const ClientOptions& o) {
  auto client = LockClient::Open(o.locks, {.ttl = o.ttl, .redlock_sequential = o.sequential});
  auto store = StoreClient::Open(o.store_url, {.timeout = 30s});
  if (!client.ok() || !store.ok()) {
    Reply({{"ok", false},
           {"message", !client.ok() ? client.status().message() : store.status().message()}});
    return 1;
  }
  Reply({{"ok", true}, {"ready", true}});
  std::unique_ptr<HeldLock> held;
  std::string last_read;  // the record as this client last read it
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "acquire") {
      auto lease = (*client)->Acquire(kLock, 30s);
      if (!lease.ok()) {
        Reply({{"ok", false}, {"message", lease.status().message()}});
        continue;
      }
      // No auto-renewal: a stop-the-world pause freezes a renewal thread too.
      held = std::make_unique<HeldLock>(**client, *lease, HeldLock::Options{});
      Reply({{"ok", true}, {"token", lease->token.value()}, {"owner", lease->owner}});
    } else if (line == "read") {
      auto r = (*store)->Get(kKey);
      if (!r.ok() && !r.status().IsNotFound()) {
        Reply({{"ok", false}, {"message", r.status().message()}});
        continue;
      }
      last_read = r.ok() ? r->value : "";
      Reply({{"ok", true}, {"value", last_read}, {"found", r.ok()}});
    } else if (line == "check") {
      if (!held) {
        Reply({{"ok", false}, {"message", "no lease"}});
        continue;
      }
      auto r = (*store)->Get(kHighestKey);
      std::int64_t highest = 0;
      if (r.ok()) {
        std::from_chars(r->value.data(), r->value.data() + r->value.size(), highest);
      } else if (!r.status().IsNotFound()) {
        Reply({{"ok", false}, {"message", r.status().message()}});
        continue;
      }
      Reply(
          {{"ok", true}, {"passed", held->lease().token.value() >= highest}, {"highest", highest}});
    } else if (line.starts_with("deposit ")) {
      if (!held) {
        Reply({{"ok", false}, {"message", "no lease"}});
        continue;
      }
      int amount = 0;
      std::from_chars(line.data() + 8, line.data() + line.size(), amount);
      // The client still believes it holds the lock: it writes, with the token it has, what it
      // computed from its last read.
      const std::string value = Deposit(last_read, o.name, amount);
      auto r = FencedPut(**store, *held, kKey, value);
      if (r.ok() && o.two_step) {
        r = FencedPut(**store, *held, kHighestKey, std::to_string(held->lease().token.value()));
      }
      json::object reply{{"ok", r.ok()},
                         {"token", held->lease().token.value()},
                         {"lease_lost", held->lost()},
                         {"value", value}};
      if (!r.ok()) {
        reply["stale"] = r.status().IsStaleToken();
        reply["wrong_service"] = r.status().IsWrongService();
        reply["highest"] = HighestToken(r.status()).value_or(0);
        reply["message"] = r.status().message();
      }
      Reply(reply);
    } else if (line == "exit") {
      break;
    }
  }
  if (held) (void)held->Release();
  return 0;
}

}  // namespace fencekit::demo
