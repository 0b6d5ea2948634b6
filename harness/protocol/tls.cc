#include "harness/protocol/tls.h"

#include "nimble/vm/error.h"

namespace nimble::protocol {

namespace ssl = boost::asio::ssl;

namespace {

std::shared_ptr<TlsContext> NewContext(ssl::context::method method) {
  auto context = std::make_shared<TlsContext>(method);
  // TLS 1.2 and 1.3 only.
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  return context;
}

}  // namespace

std::shared_ptr<TlsContext> ServerTls(const std::string& certificate_file,
                                      const std::string& key_file) {
  auto context = NewContext(ssl::context::tls_server);
  boost::system::error_code error;
  context->use_certificate_chain_file(certificate_file, error);
  if (error) throw Error(certificate_file + ": cannot use the TLS certificate: " + error.message());
  context->use_private_key_file(key_file, ssl::context::pem, error);
  if (error) throw Error(key_file + ": cannot use the TLS key: " + error.message());
  return context;
}

std::shared_ptr<TlsContext> ClientTls(const std::string& ca_file) {
  auto context = NewContext(ssl::context::tls_client);
  boost::system::error_code error;
  context->load_verify_file(ca_file, error);
  if (error) throw Error(ca_file + ": cannot load the TLS CA: " + error.message());
  context->set_verify_mode(ssl::verify_peer);
  return context;
}

}  // namespace nimble::protocol
