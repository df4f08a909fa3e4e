// The TLS client context for etcds:// (OpenSSL through Asio): TLS 1.2 or newer, etcd's
// certificate verified against a CA file or the system's, and an optional client certificate.
// Declares no Asio or OpenSSL types beyond one forward declaration, so that including it costs
// nothing; fencekit_httpclient drives the TLS streams. Private to lockclient.
#pragma once

#include <memory>
#include <string>

#include "fencekit/common/status.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace fencekit::lockclient::etcd {

// `ca_file` empty: trust the system's certificate authorities. `cert_file` and `key_file`:
// both empty, or a PEM client certificate (chain) and its PEM private key. Each file must be
// a readable regular file of at most 1 MiB. kInvalidArgument naming the file and its URI
// parameter (cacert=, cert=, key=) when one cannot be read or used, or when the key does not
// belong to the certificate.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeTlsContext(const std::string& ca_file,
                                                                  const std::string& cert_file,
                                                                  const std::string& key_file);

}  // namespace fencekit::lockclient::etcd
