// Bearer-token authentication and prefix rights for fenced (fenced --auth FILE). The file
// holds only SHA-256 digests of the tokens; a request's token is hashed once and found with one
// hash-table lookup whose equality test is constant-time (CRYPTO_memcmp).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fencekit/common/status.h"

namespace fencekit::httpapi {

// One client identity of the auth file and what it may do.
struct Principal {
  std::string name;
  std::vector<std::string> read;   // key and lock prefixes it may read ("" is everything)
  std::vector<std::string> write;  // key and lock prefixes it may write
  bool admin = false;              // everything, and alone the history, metrics and fences

  bool MayRead(std::string_view name) const { return admin || Covered(read, name); }
  bool MayWrite(std::string_view name) const { return admin || Covered(write, name); }

 private:
  static bool Covered(const std::vector<std::string>& prefixes, std::string_view name) {
    for (const auto& p : prefixes) {
      if (name.starts_with(p)) return true;
    }
    return false;
  }
};

// Thread safety: immutable once loaded; safe for concurrent use.
class Authorizer {
 public:
  using Digest = std::array<unsigned char, 32>;

  // Reads and checks an auth file; kInvalidArgument naming the file and what is wrong with it
  // (bad JSON, missing or duplicate name, bad hex or duplicate digest, unknown field, wrong type).
  static Result<std::unique_ptr<Authorizer>> LoadFile(const std::string& path);
  // The same from the file's text; `origin` names it in messages.
  static Result<std::unique_ptr<Authorizer>> FromJson(std::string_view text,
                                                      std::string_view origin);
  ~Authorizer();

  enum class Outcome {
    kOk,         // `principal` is set
    kMissing,    // no Authorization header, or not the Bearer scheme
    kMalformed,  // Bearer, but not one well-formed token (or the header given twice)
    kUnknown,    // a well-formed token that no principal has
  };
  struct Verdict {
    Outcome outcome;
    const Principal* principal = nullptr;
  };
  // Who sent a request whose Authorization header came `count` times, the first being `value`.
  Verdict Authenticate(std::string_view value, std::size_t count) const;

  std::size_t size() const { return principals_.size(); }

 private:
  struct DigestHash {
    // A digest is uniformly distributed already: its first bytes are a good hash.
    std::size_t operator()(const Digest& d) const;
  };
  struct DigestEqual {
    bool operator()(const Digest& a, const Digest& b) const;  // constant time
  };

  Authorizer();
  bool Sha256(std::string_view bytes, Digest& out) const;

  std::vector<Principal> principals_;
  std::unordered_map<Digest, std::size_t, DigestHash, DigestEqual> by_digest_;
  struct Md;  // the SHA-256 implementation, fetched once
  std::unique_ptr<Md> md_;
};

}  // namespace fencekit::httpapi
