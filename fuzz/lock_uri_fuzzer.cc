// Fuzz target "lock_uri": lock service URIs as LockClient::Open reads them (redis://, redlock://,
// etcd://, sqlite://), zk:// ones as ParseZookeeperUri reads them (opening one waits out the C
// client's connect timeout), and the host:port lists inside them (ParseEndpoints). The target runs in a
// private network namespace whose only interface is down, so a URI that parses is refused at
// connect at once and nothing leaves the machine. sqlite:// URIs that name a file are parsed by
// ParseEndpoints' caller only up to the file name; they are not opened (that would create files
// wherever the input points).
#include <cstdint>
#include <string>
#include <string_view>

#include "endpoints.h"
#include "zookeeper/uri.h"
#include "fencekit/lockclient/lock_client.h"
#include "support/fuzz_support.h"

namespace {

bool PlainHost(std::string_view host) {
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':';
    if (!ok) return false;
  }
  return true;
}

void CheckEndpoints(std::string_view list, int default_port) {
  auto parsed = fencekit::lockclient::ParseEndpoints(list, default_port);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().IsInvalidArgument(), parsed.status().ToString());
    return;
  }
  std::size_t commas = 0;
  for (char c : list) commas += c == ',';
  FUZZ_CHECK(parsed->size() == commas + 1, list);
  std::string joined;
  bool plain = true;
  for (const auto& e : *parsed) {
    FUZZ_CHECK(!e.host.empty(), list);
    FUZZ_CHECK(e.port >= 1 && e.port <= 65535, list);
    FUZZ_CHECK(e.host.find(',') == std::string::npos, list);
    plain = plain && PlainHost(e.host);
    joined += (joined.empty() ? "" : ",") + e.Name();
  }
  // Names of ordinary hosts and IP addresses read back as the same endpoints.
  if (!plain) return;
  auto again = fencekit::lockclient::ParseEndpoints(joined);
  FUZZ_CHECK(again.ok() && again->size() == parsed->size(), joined);
  for (std::size_t i = 0; i < parsed->size(); ++i) {
    FUZZ_CHECK((*again)[i].host == (*parsed)[i].host && (*again)[i].port == (*parsed)[i].port,
               joined);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fencekit::fuzz::EnterPrivateNetwork();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view uri(reinterpret_cast<const char*>(data), size);
  CheckEndpoints(uri, 0);
  CheckEndpoints(uri, 6379);

  // "" is the default lock service, a SQLite file (DefaultLockUri): not opened, as paths below.
  if (uri.empty()) return 0;
  if (uri.starts_with("sqlite://")) {
    std::string_view path = uri.substr(9);
    if (!path.empty() && path != "/") return 0;  // a file: not opened, see above
  }
  if (uri.starts_with("zk://") || uri.starts_with("zks://")) {
    auto zk = fencekit::lockclient::ParseZookeeperUri(uri);
    FUZZ_CHECK(zk.ok() || zk.status().IsInvalidArgument(), zk.status().ToString());
    if (zk.ok()) {
      FUZZ_CHECK(!zk->endpoints.empty() && zk->prefix.starts_with("/"), zk->shown);
      FUZZ_CHECK(zk->shown.find('@') == std::string::npos || !zk->user.empty(), zk->shown);
    }
    return 0;
  }
  fencekit::LockOptions options;
  options.op_timeout = std::chrono::milliseconds(200);
  options.redlock_node_timeout = std::chrono::milliseconds(50);
  options.retry_min = std::chrono::milliseconds(1);
  options.retry_max = std::chrono::milliseconds(1);
  options.pool_size = 1;
  auto client = fencekit::LockClient::Open(uri, options);
  // Nothing can be reached from here: every URI is refused, as malformed or as unreachable.
  FUZZ_CHECK(!client.ok(), uri);
  FUZZ_CHECK(client.status().IsInvalidArgument() || client.status().IsUnavailable(),
             client.status().ToString());
  return 0;
}
