// Endpoint lists: the host:port part of redis://, redlock:// and etcd:// URIs, and lock
// URIs shown without their password. Private to lockclient.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::lockclient {

// One server's address. Thread safety: a value; safe to share when not modified.
struct Endpoint {
  std::string host;  // a name or an IP address; an IPv6 address without its brackets
  int port = 0;      // 1 to 65535
  // "host:port" ("[::1]:6379" for IPv6), as messages and HTTP Host headers show it.
  std::string Name() const;
};

// Parses "h1:p1,h2:p2,...": one or more entries separated by commas, each host:port with a port
// from 1 to 65535; an IPv6 host is written in brackets ("[::1]:2379"). With `default_port`
// above 0, an entry may leave out ":port" and gets that one.
// kInvalidArgument saying which entry is wrong and why (the caller adds the URI and its form).
Result<std::vector<Endpoint>> ParseEndpoints(std::string_view list, int default_port = 0);

// The "user:password" before the hosts of a lock URI, percent-decoded. kInvalidArgument saying
// what is wrong (never quoting the password; the caller adds the URI and its form): no ':', a
// bad %, an empty user or password, a user that fails CheckName (`what_user` names it), a
// password over 1024 bytes.
struct Credentials {
  std::string user, password;
};
Result<Credentials> ParseUserinfo(std::string_view userinfo, std::string_view what_user);

// As LockUriWithoutPassword (lock_client.h).
std::string UriWithoutPassword(std::string_view uri);

}  // namespace fencekit::lockclient
