// etcd:// and etcds:// lock service URIs: endpoints, credentials, TLS files and the key prefix.
// Private to lockclient.
//
//   etcd[s]://[user:password@]h1:p1[,h2:p2,...][/][?prefix=P][&cacert=F][&cert=F&key=F]
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "endpoints.h"
#include "fencekit/common/status.h"

namespace fencekit::lockclient {

inline constexpr std::string_view kDefaultEtcdKeyPrefix = "fencekit/";
inline constexpr std::size_t kMaxEtcdKeyPrefixBytes = 256;

// What an etcd URI says. Thread safety: a value.
struct EtcdUri {
  bool tls = false;  // etcds://
  std::vector<Endpoint> endpoints;
  std::string user, password;       // both empty: no authentication
  std::string ca_file;              // etcds:// only; empty: the system's certificate authorities
  std::string cert_file, key_file;  // etcds:// only; a client certificate, both or neither
  std::string key_prefix = std::string(kDefaultEtcdKeyPrefix);
  // The URI without the password ("etcd://user@h1:p1?prefix=app/"), for service() and
  // messages.
  std::string shown;
};

// kInvalidArgument saying what is wrong, quoting the URI without its password, and the form.
// Percent-decodes the user, the password and the parameter values.
Result<EtcdUri> ParseEtcdUri(std::string_view uri);

// OK when `prefix` is 1 to kMaxEtcdKeyPrefixBytes bytes of A-Z a-z 0-9 . _ - / and ends in
// '/'. kInvalidArgument saying so otherwise.
Status CheckEtcdKeyPrefix(std::string_view prefix);

}  // namespace fencekit::lockclient
