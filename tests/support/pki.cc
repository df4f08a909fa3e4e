#include "support/pki.h"

#include <gtest/gtest.h>

#include <fstream>

namespace fencekit::testing {

Pki::Pki() {
  Run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
       "-nodes", "-keyout", ca_key(), "-out", ca(), "-days", "2", "-subj", "/CN=fencekit test CA"});
  Issue("server", "subjectAltName=IP:127.0.0.1,DNS:localhost");
  Issue("other", "subjectAltName=DNS:other.example");
  Issue("client", "basicConstraints=CA:FALSE");
  Issue("anonymous", "basicConstraints=CA:FALSE", "/O=fencekit test client");
}

void Pki::Run(const std::vector<std::string>& argv) {
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << argv[0] << " " << argv[1] << ": " << r.err;
}

void Pki::Issue(const std::string& name, const std::string& extensions,
                const std::string& subject) {
  std::string ext = dir_.File(name + ".ext");
  std::ofstream(ext) << extensions << "\n";
  Run({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
       "-keyout", key(name), "-out", dir_.File(name + ".csr"), "-subj",
       subject.empty() ? "/CN=" + name : subject});
  Run({"openssl", "x509", "-req", "-in", dir_.File(name + ".csr"), "-CA", ca(), "-CAkey", ca_key(),
       "-CAcreateserial", "-out", cert(name), "-days", "2", "-extfile", ext});
}

}  // namespace fencekit::testing
