// TLS for the fleet's connections (optional; the shared-secret handshake
// runs inside it either way). The coordinator presents a certificate
// (--tls-cert, --tls-key); its agents and clients verify it against a CA
// file (--tls-ca) and the coordinator's host name or address, so the
// traffic after the handshake is confidential and cannot be altered.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

namespace nimble::protocol {

using TlsContext = boost::asio::ssl::context;

// Throws nimble::Error naming the file and OpenSSL's reason.
std::shared_ptr<TlsContext> ServerTls(const std::string& certificate_file,
                                      const std::string& key_file);
std::shared_ptr<TlsContext> ClientTls(const std::string& ca_file);

}  // namespace nimble::protocol
