// A command-line client of the coordinator (`nimble-bench submit`,
// `status`, `run --coordinator`, `agents`): connects, runs the handshake in
// the "client" role, then sends requests and waits for their replies, one
// at a time.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>

#include "harness/protocol/connection.h"
#include "harness/protocol/handshake.h"
#include "harness/protocol/tls.h"

namespace nimble::protocol {

class Client {
 public:
  // Throws nimble::Error naming the address when it cannot connect or is
  // refused. With `tls`, the coordinator's certificate is verified.
  Client(const std::string& address, const std::string& secret,
         std::shared_ptr<TlsContext> tls = nullptr);
  ~Client();

  // The reply to `request`; throws nimble::Error for an "error" reply (with
  // the coordinator's reason) or a lost connection.
  Json Request(const Json& request);

 private:
  template <typename T>
  T Await(boost::asio::awaitable<T> operation);

  std::string address_;
  std::shared_ptr<TlsContext> tls_;
  boost::asio::io_context io_;
  std::shared_ptr<Connection> connection_;
};

}  // namespace nimble::protocol
