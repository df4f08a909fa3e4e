// The TLS context of an HTTPS fenced (--tls-cert, --tls-key): TLS 1.2 or newer.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "fencekit/common/status.h"

namespace fencekit::httpapi {

// A server context serving the PEM certificate chain `cert_file` with the PEM private key
// `key_file`. kInvalidArgument naming the file when one cannot be read or parsed, or when the
// key does not belong to the certificate.
Result<std::unique_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const std::string& cert_file, const std::string& key_file);

}  // namespace fencekit::httpapi
