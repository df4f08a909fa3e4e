#include "net/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace fencekit::httpapi {
namespace ssl = boost::asio::ssl;

namespace {

// OpenSSL's reason for the last failure, and its error queue cleared.
std::string OpenSslReason(const boost::system::error_code& ec) {
  std::string reason = ec ? ec.message() : std::string();
  if (unsigned long e = ERR_peek_last_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    reason = buf;
  }
  ERR_clear_error();
  return reason.empty() ? "unknown error" : reason;
}

Status Readable(const std::string& path, const char* flag, const char* what) {
  std::ifstream in(path);
  if (in) return Status::Ok();
  return Status::InvalidArgument("cannot read the TLS " + std::string(what) + " \"" + path +
                                 "\" (" + flag + "): " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<ssl::context>> MakeServerTlsContext(const std::string& cert_file,
                                                           const std::string& key_file) {
  if (cert_file.empty() || key_file.empty()) {
    return Status::InvalidArgument(
        "HTTPS needs both --tls-cert and --tls-key (PEM files); give both or neither");
  }
  if (Status s = Readable(cert_file, "--tls-cert", "certificate"); !s.ok()) return s;
  if (Status s = Readable(key_file, "--tls-key", "key"); !s.ok()) return s;
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) {
    return Status::InvalidArgument(
        "the TLS certificate \"" + cert_file +
        "\" (--tls-cert) is not a PEM certificate chain: " + OpenSslReason(ec));
  }
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  // OpenSSL 3 checks the pair here already (Asio reports OpenSSL's error code in `ec`).
  const bool mismatch =
      ec && ec.category() == boost::asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
  if (ec && !mismatch) {
    return Status::InvalidArgument("the TLS key \"" + key_file +
                                   "\" (--tls-key) is not a PEM private key: " + OpenSslReason(ec));
  }
  if (mismatch || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return Status::InvalidArgument("the TLS key \"" + key_file +
                                   "\" (--tls-key) does not belong to the certificate \"" +
                                   cert_file + "\" (--tls-cert): " + OpenSslReason(ec) +
                                   "; give the key the certificate was issued for");
  }
  return ctx;
}

}  // namespace fencekit::httpapi
