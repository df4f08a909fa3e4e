#include "etcd/uri.h"

#include <boost/url/parse_query.hpp>
#include <boost/url/pct_string_view.hpp>
#include <optional>

#include "fencekit/common/names.h"
#include "fencekit/common/text.h"

namespace fencekit::lockclient {
namespace {

constexpr std::string_view kForm =
    "use etcd://h1:p1[,h2:p2,...] or etcds://h1:p1[,...] (HTTPS), optionally with "
    "user:password@ before the hosts and the parameters prefix=P, and for etcds:// "
    "cacert=FILE and cert=FILE&key=FILE (e.g. etcds://app:pw@h1:2379?cacert=ca.pem&prefix=app/)";
constexpr std::size_t kMaxFileBytes = 4096;

// Where the authority (userinfo@hosts) ends: at the first '/', '?' or '#' after the scheme.
std::size_t AuthorityEnd(std::string_view uri, std::size_t start) {
  std::size_t end = uri.find_first_of("/?#", start);
  return end == std::string_view::npos ? uri.size() : end;
}

std::optional<std::string> Decode(std::string_view encoded) {
  auto pct = boost::urls::make_pct_string_view(encoded);
  if (!pct) return std::nullopt;
  return pct->decode();
}

}  // namespace

Status CheckEtcdKeyPrefix(std::string_view prefix) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("the etcd key prefix \"" + JsonSafeText(prefix) + "\" " +
                                   std::string(why) +
                                   "; use 1 to 256 characters of A-Z a-z 0-9 . _ - / ending "
                                   "in /, e.g. prefix=myapp/locks/");
  };
  if (prefix.empty()) return bad("is empty");
  if (prefix.size() > kMaxEtcdKeyPrefixBytes) return bad("is too long");
  for (char c : prefix) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '/';
    if (!ok) return bad("has a character outside the allowed ones");
  }
  if (prefix.back() != '/') return bad("does not end in /");
  return Status::Ok();
}

Result<EtcdUri> ParseEtcdUri(std::string_view uri) {
  const std::string shown_raw = UriWithoutPassword(uri);
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("lock service URI \"" + JsonSafeText(shown_raw) +
                                   "\" is invalid: " + std::string(why) + "; " +
                                   std::string(kForm));
  };
  EtcdUri out;
  std::string_view scheme;
  if (uri.starts_with("etcds://")) {
    out.tls = true;
    scheme = "etcds://";
  } else if (uri.starts_with("etcd://")) {
    scheme = "etcd://";
  } else {
    return bad("it is neither etcd:// nor etcds://");
  }
  std::size_t start = scheme.size();
  // With an '@', parts of the URI may hold a password (one with an unencoded '/', '?' or '#'
  // ends the host list early): messages then say what is wrong without quoting them.
  const bool may_hold_password = uri.find('@', start) != std::string_view::npos;
  auto quoting = [&](std::string text, std::string_view instead) {
    return may_hold_password ? std::string(instead) : text;
  };
  std::size_t end = AuthorityEnd(uri, start);
  std::string_view authority = uri.substr(start, end - start);
  std::string_view rest = uri.substr(end);

  // user:password@
  if (std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto credentials = ParseUserinfo(userinfo, "the etcd user name");
    if (!credentials.ok()) return bad(credentials.status().message());
    out.user = std::move(credentials->user);
    out.password = std::move(credentials->password);
  }
  auto endpoints = ParseEndpoints(authority);
  if (!endpoints.ok()) {
    return bad(quoting(endpoints.status().message(),
                       "it names no valid host:port list after user:password@ (a password "
                       "must percent-encode / ? # @ as %2F %3F %23 %40)"));
  }
  out.endpoints = std::move(endpoints).value();

  // [/][?query]; no other path, no fragment.
  if (rest.starts_with("/")) rest.remove_prefix(1);
  std::string_view query;
  if (rest.starts_with("?")) {
    query = rest.substr(1);
    rest = {};
  }
  if (!rest.empty()) return bad("it has a path or a fragment; an etcd URI has neither");
  if (query.find('#') != std::string_view::npos) return bad("it has a fragment");
  bool has_prefix = false;
  if (!query.empty()) {
    // A copy: Boost.URL 1.81's parse_query reads its argument up to a NUL (strlen), past the
    // end of a view that is not NUL-terminated (found by fuzz_lock_uri).
    const std::string query_text(query);
    auto params = boost::urls::parse_query(query_text);
    if (!params) return bad("its query is not key=value pairs joined by &");
    for (auto param : *params) {
      auto key = Decode(param.key);
      auto value = Decode(param.value);
      if (!key || !value) return bad("a parameter has a % not followed by two hex digits");
      std::string* field = nullptr;
      if (*key == "prefix") {
        if (has_prefix) return bad("it gives prefix twice");
        has_prefix = true;
        field = &out.key_prefix;
      } else if (*key == "cacert") {
        field = &out.ca_file;
      } else if (*key == "cert") {
        field = &out.cert_file;
      } else if (*key == "key") {
        field = &out.key_file;
      } else {
        return bad(quoting("it has an unknown parameter \"" + JsonSafeText(*key) + "\"",
                           "it has an unknown parameter") +
                   " (known: prefix, cacert, cert, key)");
      }
      const std::string& name = *key;  // one of the known names
      if (!param.has_value || value->empty()) {
        return bad("the parameter " + name + " has no value; give " + name + "=...");
      }
      if (name != "prefix") {
        if (!out.tls) return bad(name + "= is for TLS; use etcds:// to speak HTTPS to etcd");
        if (!field->empty()) return bad("it gives " + name + " twice");
        if (value->size() > kMaxFileBytes || value->find('\0') != std::string::npos) {
          return bad("the file name of " + name + "= is not a usable path");
        }
      }
      *field = std::move(*value);
    }
  }
  if (Status s = CheckEtcdKeyPrefix(out.key_prefix); !s.ok()) return bad(s.message());
  if (out.cert_file.empty() != out.key_file.empty()) {
    return bad("a client certificate needs both cert=FILE and key=FILE");
  }

  out.shown = std::string(scheme);
  if (!out.user.empty()) out.shown += PercentEncode(out.user) + "@";
  for (std::size_t i = 0; i < out.endpoints.size(); ++i) {
    out.shown += (i ? "," : "") + out.endpoints[i].Name();
  }
  if (has_prefix) out.shown += "?prefix=" + out.key_prefix;
  return out;
}

}  // namespace fencekit::lockclient
