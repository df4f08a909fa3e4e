// Certificates for TLS tests, made at test time with the openssl command in a temporary folder:
// a CA, and certificates it signed (EC P-256, valid 2 days, no extended key usage, so each
// serves as a server or a client certificate). Not thread-safe; read-only once made.
#pragma once

#include <string>

#include "support/test_support.h"

namespace fencekit::testing {

class Pki {
 public:
  // Makes the CA and these certificates: "server" for IP:127.0.0.1 and DNS:localhost,
  // "other" for DNS:other.example only, "client" (CN=client), and "anonymous" (no CN: etcd's
  // gateway refuses client certificates with one once authentication is on). Fails the test
  // (ADD_FAILURE) when openssl does.
  Pki();
  std::string ca() const { return dir_.File("ca.pem"); }
  std::string ca_key() const { return dir_.File("ca.key"); }
  std::string cert(const std::string& name = "server") const { return dir_.File(name + ".pem"); }
  std::string key(const std::string& name = "server") const { return dir_.File(name + ".key"); }
  const TempDir& dir() const { return dir_; }

 private:
  void Run(const std::vector<std::string>& argv);
  void Issue(const std::string& name, const std::string& extensions,
             const std::string& subject = "");  // default: /CN=<name>
  TempDir dir_;
};

}  // namespace fencekit::testing
