// zk:// lock service URIs: the ensemble's members, digest credentials and the znode prefix.
// Private to lockclient.
//
//   zk://[user:password@]h1:p1[,h2:p2,...][/prefix/path]
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "endpoints.h"
#include "fencekit/common/status.h"

namespace fencekit::lockclient {

inline constexpr std::string_view kDefaultZookeeperPrefix = "/fencekit";
inline constexpr std::size_t kMaxZookeeperPrefixBytes = 256;

// What a ZooKeeper URI says. Thread safety: a value.
struct ZookeeperUri {
  std::vector<Endpoint> endpoints;
  std::string user, password;  // both empty: no authentication (else ZooKeeper's digest scheme)
  // Where fencekit's znodes live: "/a/b", no trailing '/'.
  std::string prefix = std::string(kDefaultZookeeperPrefix);
  // "h1:p1,h2:p2", as the C client takes it.
  std::string hosts;
  // The URI without the password ("zk://user@h1:p1/app"), for service() and messages.
  std::string shown;
};

// kInvalidArgument saying what is wrong, quoting the URI without its password, and the form.
// zks:// is refused: Debian's C client (libzookeeper-mt) is built without TLS.
Result<ZookeeperUri> ParseZookeeperUri(std::string_view uri);

}  // namespace fencekit::lockclient
