// Asio's SSL (OpenSSL) support, compiled once like the rest of Asio (asio_impl.cc), in its own
// object file: only programs that use TLS pull it in, and with it OpenSSL.
#include <boost/asio/ssl/impl/src.hpp>
