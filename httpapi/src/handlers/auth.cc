#include "handlers/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "wire.h"

namespace fencekit::httpapi {
namespace json = boost::json;

namespace {

// The auth file is small; anything larger is not one.
constexpr std::size_t kMaxFileBytes = 1 << 20;
constexpr std::size_t kMaxNameBytes = 64;
constexpr std::string_view kDigestHint =
    "; it must be the 64 hex digits of the token's SHA-256 (printf %s \"$TOKEN\" | sha256sum)";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseDigest(std::string_view hex, Authorizer::Digest& out) {
  if (hex.size() != 2 * out.size()) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  return true;
}

// Principal names reach the history and logs: plain printable ASCII only.
bool GoodName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IEqualsAscii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

struct Authorizer::Md {
  EVP_MD* md = nullptr;
  ~Md() { EVP_MD_free(md); }
};

Authorizer::Authorizer() : md_(std::make_unique<Md>()) {}
Authorizer::~Authorizer() = default;

std::size_t Authorizer::DigestHash::operator()(const Digest& d) const {
  std::size_t h;
  std::memcpy(&h, d.data(), sizeof h);
  return h;
}

bool Authorizer::DigestEqual::operator()(const Digest& a, const Digest& b) const {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool Authorizer::Sha256(std::string_view bytes, Digest& out) const {
  unsigned int n = 0;
  return EVP_Digest(bytes.data(), bytes.size(), out.data(), &n, md_->md, nullptr) == 1 &&
         n == out.size();
}

Result<std::unique_ptr<Authorizer>> Authorizer::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument("cannot read the auth file \"" + path + "\" (--auth): " +
                                   std::strerror(errno) + "; give a readable JSON file");
  }
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) {
    return Status::InvalidArgument("the auth file \"" + path +
                                   "\" is larger than 1 MiB; it is "
                                   "not an auth file");
  }
  return FromJson(text, path);
}

Result<std::unique_ptr<Authorizer>> Authorizer::FromJson(std::string_view text,
                                                         std::string_view origin) {
  const std::string where = "auth file \"" + std::string(origin) + "\"";
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(where + ": " + what + " (see docs/http-api.md, the auth file)");
  };
  boost::system::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec) return bad("not valid JSON: " + ec.message());
  if (!root.is_object()) return bad("the top level must be an object {\"principals\": [...]}");
  for (const auto& field : root.as_object()) {
    if (field.key() != "principals") {
      return bad("unknown field \"" + std::string(field.key()) +
                 "\" at the top level; only "
                 "\"principals\" is allowed");
    }
  }
  const json::value* list = root.as_object().if_contains("principals");
  if (list == nullptr || !list->is_array()) {
    return bad("\"principals\" must be a list of principals");
  }
  if (list->as_array().empty()) return bad("\"principals\" is empty; name at least one");

  auto auth = std::unique_ptr<Authorizer>(new Authorizer());
  auth->md_->md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (auth->md_->md == nullptr) {
    return Status::Internal("OpenSSL has no SHA-256 implementation available");
  }
  std::size_t index = 0;
  for (const auto& item : list->as_array()) {
    std::string at = "principals[" + std::to_string(index++) + "]";
    if (!item.is_object()) return bad(at + " must be an object");
    const auto& o = item.as_object();
    Principal p;
    Digest digest{};
    bool has_digest = false;
    for (const auto& field : o) {
      std::string_view key = field.key();
      const json::value& v = field.value();
      if (key == "name") {
        if (!v.is_string() || !GoodName(v.as_string())) {
          return bad(at +
                     ": \"name\" must be a string of 1 to 64 characters from A-Z a-z 0-9 "
                     ". _ : @ -");
        }
        p.name = std::string(v.as_string());
      } else if (key == "token_sha256") {
        if (!v.is_string() || !ParseDigest(v.as_string(), digest)) {
          return bad(at + ": \"token_sha256\" is invalid" + std::string(kDigestHint));
        }
        has_digest = true;
      } else if (key == "read" || key == "write") {
        if (!v.is_array())
          return bad(at + ": \"" + std::string(key) +
                     "\" must be a list of "
                     "key prefixes (strings)");
        auto& out = key == "read" ? p.read : p.write;
        for (const auto& prefix : v.as_array()) {
          if (!prefix.is_string()) {
            return bad(at + ": \"" + std::string(key) +
                       "\" must hold only strings (key "
                       "prefixes; \"\" is every key)");
          }
          out.emplace_back(prefix.as_string());
        }
      } else if (key == "admin") {
        if (!v.is_bool()) return bad(at + ": \"admin\" must be true or false");
        p.admin = v.as_bool();
      } else {
        return bad(at + ": unknown field \"" + std::string(key) +
                   "\"; the fields are name, "
                   "token_sha256, read, write and admin");
      }
    }
    if (p.name.empty()) return bad(at + " has no \"name\"");
    if (!has_digest)
      return bad(at + " (\"" + p.name + "\") has no \"token_sha256\"" + std::string(kDigestHint));
    for (const auto& other : auth->principals_) {
      if (other.name == p.name) return bad(at + ": the name \"" + p.name + "\" is used twice");
    }
    if (auth->by_digest_.contains(digest)) {
      return bad(at + " (\"" + p.name +
                 "\") has the same token_sha256 as an earlier principal; "
                 "give each principal its own token");
    }
    auth->by_digest_.emplace(digest, auth->principals_.size());
    auth->principals_.push_back(std::move(p));
  }
  return auth;
}

Authorizer::Verdict Authorizer::Authenticate(std::string_view value, std::size_t count) const {
  if (count == 0) return {Outcome::kMissing};
  if (count > 1) return {Outcome::kMalformed};
  constexpr std::string_view kScheme = "bearer";
  if (value.size() < kScheme.size() || !IEqualsAscii(value.substr(0, kScheme.size()), kScheme) ||
      (value.size() > kScheme.size() && value[kScheme.size()] != ' ')) {
    return {Outcome::kMissing};
  }
  std::string_view token = value.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (!wire::IsBearerToken(token)) return {Outcome::kMalformed};
  Digest digest;
  if (!Sha256(token, digest)) return {Outcome::kUnknown};
  auto it = by_digest_.find(digest);
  if (it == by_digest_.end()) return {Outcome::kUnknown};
  return {Outcome::kOk, &principals_[it->second]};
}

}  // namespace fencekit::httpapi
