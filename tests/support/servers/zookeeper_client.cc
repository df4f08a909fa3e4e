#include "support/servers/zookeeper_client.h"

// The synchronous calls are declared for the multithreaded library only.
#define THREADED
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <thread>

namespace fencekit::testing {

int ZookeeperDeleteChildren(const std::string& hosts, const std::string& path) {
  zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
  zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 10'000, nullptr, nullptr, 0);
  if (zh == nullptr) return -1;
  // Connected once a call gets through: retry while the session is being set up.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  String_vector children{};
  int rc = ZCONNECTIONLOSS;
  while (std::chrono::steady_clock::now() < until) {
    rc = zoo_get_children(zh, path.c_str(), 0, &children);
    if (rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int deleted = rc == ZOK ? 0 : -1;
  if (rc == ZOK) {
    for (int i = 0; i < children.count; ++i) {
      if (zoo_delete(zh, (path + "/" + children.data[i]).c_str(), -1) == ZOK) ++deleted;
    }
    deallocate_String_vector(&children);
  }
  zookeeper_close(zh);
  return deleted;
}

}  // namespace fencekit::testing
