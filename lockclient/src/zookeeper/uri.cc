#include "zookeeper/uri.h"

#include <optional>

#include "fencekit/common/names.h"
#include "fencekit/common/text.h"

namespace fencekit::lockclient {
namespace {

constexpr std::string_view kForm =
    "use zk://h1:p1[,h2:p2,...][/prefix], optionally with user:password@ before the hosts "
    "(ZooKeeper's digest authentication), e.g. zk://app:pw@zk1:2181,zk2:2181/myapp/locks";

// OK for "/seg[/seg...]", each segment 1+ of A-Z a-z 0-9 . _ - and neither "." nor "..".
std::optional<std::string> PrefixProblem(std::string_view prefix) {
  if (prefix.size() > kMaxZookeeperPrefixBytes) return "the prefix is over 256 bytes";
  std::size_t start = 1;
  while (start <= prefix.size()) {
    std::size_t end = prefix.find('/', start);
    if (end == std::string_view::npos) end = prefix.size();
    std::string_view segment = prefix.substr(start, end - start);
    if (segment.empty()) return "the prefix has an empty segment (// or a trailing /)";
    if (segment == "." || segment == "..") return "the prefix has a . or .. segment";
    for (char c : segment) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
      if (!ok) return "the prefix has a character outside A-Z a-z 0-9 . _ - /";
    }
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace

Result<ZookeeperUri> ParseZookeeperUri(std::string_view uri) {
  const std::string shown_raw = UriWithoutPassword(uri);
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + JsonSafeText(shown_raw) +
                                   "\" is invalid: " + std::string(why) + "; " +
                                   std::string(kForm));
  };
  if (uri.starts_with("zks://")) {
    return bad(
        "zks:// (TLS) is not available: Debian's ZooKeeper C client (libzookeeper-mt) is built "
        "without TLS; reach the ensemble over a trusted network or a TLS tunnel");
  }
  if (!uri.starts_with("zk://")) return bad("it is not zk://");
  ZookeeperUri out;
  const std::size_t start = 5;
  const bool may_hold_password = uri.find('@', start) != std::string_view::npos;
  std::size_t end = uri.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = uri.size();
  std::string_view authority = uri.substr(start, end - start);
  std::string_view rest = uri.substr(end);
  if (std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto credentials = ParseUserinfo(userinfo, "the ZooKeeper user name");
    if (!credentials.ok()) return bad(credentials.status().message());
    // The digest scheme's credentials are "user:password": a ':' in the user would split them
    // elsewhere, and the C client takes them up to a NUL.
    if (credentials->user.find(':') != std::string::npos) return bad("the user name has a ':'");
    if (credentials->password.find('\0') != std::string::npos) {
      return bad("the password has a NUL byte");
    }
    out.user = std::move(credentials->user);
    out.password = std::move(credentials->password);
  }
  auto endpoints = ParseEndpoints(authority);
  if (!endpoints.ok()) {
    return bad(may_hold_password
                   ? "it names no valid host:port list after user:password@ (a password must "
                     "percent-encode / ? # @ as %2F %3F %23 %40)"
                   : endpoints.status().message());
  }
  out.endpoints = std::move(endpoints).value();
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return bad("it has a query or a fragment; a zk:// URI has neither");
  }
  if (!rest.empty() && rest != "/") {
    if (auto problem = PrefixProblem(rest)) return bad(*problem);
    out.prefix = std::string(rest);
  }
  for (std::size_t i = 0; i < out.endpoints.size(); ++i) {
    out.hosts += (i ? "," : "") + out.endpoints[i].Name();
  }
  out.shown = "zk://";
  if (!out.user.empty()) out.shown += PercentEncode(out.user) + "@";
  out.shown += out.hosts + out.prefix;
  return out;
}

}  // namespace fencekit::lockclient
