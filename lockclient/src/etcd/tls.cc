#include "etcd/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fencekit::lockclient::etcd {
namespace {

namespace ssl = boost::asio::ssl;

constexpr std::uintmax_t kMaxPemBytes = 1 << 20;

// Why OpenSSL failed (its error queue, else `ec`); the queue is left empty.
std::string Why(const boost::system::error_code& ec) {
  std::string why;
  if (unsigned long e = ERR_peek_last_error(); e != 0) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    why = text;
  } else if (ec) {
    why = ec.message();
  }
  ERR_clear_error();
  return why.empty() ? "no reason given" : why;
}

// A regular file, readable, of at most kMaxPemBytes: never a device or a pipe that OpenSSL
// would read from forever.
Status Usable(const std::string& path, const std::string& what) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec) return Status::InvalidArgument("cannot read " + what + ": " + ec.message());
  if (!std::filesystem::is_regular_file(status)) {
    return Status::InvalidArgument(what + " is not a regular file; give a PEM file");
  }
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxPemBytes) {
    return Status::InvalidArgument(what + " is over 1 MiB; give a PEM file");
  }
  if (!std::ifstream(path)) {
    return Status::InvalidArgument("cannot read " + what + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeTlsContext(const std::string& ca_file,
                                                     const std::string& cert_file,
                                                     const std::string& key_file) {
  const std::string ca = "the CA file \"" + ca_file + "\" (cacert=)";
  const std::string cert = "the client certificate \"" + cert_file + "\" (cert=)";
  const std::string key = "the client key \"" + key_file + "\" (key=)";
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) {
      return Status::InvalidArgument(
          "cannot load the system's certificate authorities: " + Why(ec) +
          "; give the CA that signed etcd's certificate "
          "with cacert=FILE");
    }
  } else {
    if (Status s = Usable(ca_file, ca); !s.ok()) return s;
    ctx->load_verify_file(ca_file, ec);
    if (ec) {
      return Status::InvalidArgument(ca + " holds no PEM certificate: " + Why(ec) +
                                     "; give the CA that signed etcd's certificate");
    }
  }
  if (cert_file.empty()) return ctx;
  if (Status s = Usable(cert_file, cert); !s.ok()) return s;
  if (Status s = Usable(key_file, key); !s.ok()) return s;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) return Status::InvalidArgument(cert + " is not a PEM certificate chain: " + Why(ec));
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  // OpenSSL 3 already compares the key with the certificate here.
  if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return Status::InvalidArgument(key + " is not the PEM private key of " + cert + ": " + Why(ec) +
                                   "; give the key the certificate was issued for");
  }
  return ctx;
}

}  // namespace fencekit::lockclient::etcd
