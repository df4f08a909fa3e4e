#include "endpoints.h"

#include <boost/url/pct_string_view.hpp>
#include <charconv>
#include <optional>

#include "fencekit/common/names.h"

namespace fencekit::lockclient {
namespace {

Result<Endpoint> ParseOne(std::string_view entry, int default_port) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("\"" + std::string(entry) + "\" " + std::string(why));
  };
  if (entry.empty()) return Status::InvalidArgument("an entry of the host:port list is empty");
  std::string_view host, port;
  bool has_port;
  if (entry.front() == '[') {
    auto close = entry.find(']');
    if (close == std::string_view::npos)
      return bad("opens an IPv6 address with [ but never closes it");
    host = entry.substr(1, close - 1);
    std::string_view after = entry.substr(close + 1);
    has_port = !after.empty();
    if (has_port && after.front() != ':')
      return bad("has text after the IPv6 address; use [addr]:port");
    if (has_port) port = after.substr(1);
  } else {
    auto colon = entry.rfind(':');
    has_port = colon != std::string_view::npos;
    host = entry.substr(0, colon);
    if (has_port) port = entry.substr(colon + 1);
  }
  if (host.empty()) return bad("names no host; use host:port");
  if (!has_port) {
    if (default_port <= 0) return bad("needs a port; use host:port");
    return Endpoint{std::string(host), default_port};
  }
  int number = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || number <= 0 ||
      number > 65535) {
    return bad("has no valid port (a number from 1 to 65535)");
  }
  return Endpoint{std::string(host), number};
}

}  // namespace

std::string Endpoint::Name() const {
  std::string port_text = ":" + std::to_string(port);
  if (host.find(':') != std::string::npos) return "[" + host + "]" + port_text;
  return host + port_text;
}

Result<std::vector<Endpoint>> ParseEndpoints(std::string_view list, int default_port) {
  if (list.empty()) return Status::InvalidArgument("it names no host:port");
  std::vector<Endpoint> out;
  for (bool more = true; more;) {
    auto comma = list.find(',');
    more = comma != std::string_view::npos;
    auto one = ParseOne(list.substr(0, comma), default_port);
    if (!one.ok()) return one.status();
    out.push_back(std::move(one).value());
    list = more ? list.substr(comma + 1) : std::string_view();
  }
  return out;
}

Result<Credentials> ParseUserinfo(std::string_view userinfo, std::string_view what_user) {
  std::size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) {
    return Status::InvalidArgument("it names a user without a password; use user:password@");
  }
  auto decode = [](std::string_view encoded) -> std::optional<std::string> {
    auto pct = boost::urls::make_pct_string_view(encoded);
    if (!pct) return std::nullopt;
    return pct->decode();
  };
  auto user = decode(userinfo.substr(0, colon));
  auto password = decode(userinfo.substr(colon + 1));
  if (!user || !password) {
    return Status::InvalidArgument(
        "the user or the password has a % not followed by two hex digits");
  }
  if (user->empty()) return Status::InvalidArgument("the user name is empty");
  if (Status s = CheckName(what_user, *user, 128); !s.ok()) return s;
  if (password->empty()) return Status::InvalidArgument("the password is empty");
  if (password->size() > 1024) return Status::InvalidArgument("the password is over 1024 bytes");
  return Credentials{std::move(*user), std::move(*password)};
}

std::string UriWithoutPassword(std::string_view uri) {
  std::size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) return std::string(uri);
  // The last '@' anywhere: a password with an unencoded '/', '?' or '#' is hidden too (at
  // worst, a query holding an '@' hides the hosts as well).
  std::size_t at = uri.rfind('@');
  if (at == std::string_view::npos || at < scheme + 3) return std::string(uri);
  std::size_t colon = uri.substr(0, at).find(':', scheme + 3);
  if (colon == std::string_view::npos) return std::string(uri);
  return std::string(uri.substr(0, colon)) + ":***" + std::string(uri.substr(at));
}

}  // namespace fencekit::lockclient
