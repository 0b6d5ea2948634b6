#include "harness/protocol/handshake.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

#include "harness/protocol/auth.h"
#include "harness/protocol/messages.h"
#include "nimble/vm/error.h"

namespace nimble::protocol {

namespace asio = boost::asio;

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);

HostPort ParseHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw Error("'" + text + "' is not HOST:PORT");
  }
  HostPort address{text.substr(0, colon), 0};
  int port = 0;
  try {
    size_t used = 0;
    port = std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) throw Error("'" + text + "': the port is not 0..65535");
  address.port = static_cast<uint16_t>(port);
  return address;
}

asio::awaitable<Socket> ConnectTo(const HostPort& address,
                                  std::chrono::steady_clock::duration timeout) {
  auto executor = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(executor);
  const auto endpoints = co_await resolver.async_resolve(address.host, std::to_string(address.port),
                                                         asio::use_awaitable);
  Socket socket(executor);
  asio::steady_timer timer(executor, timeout);
  timer.async_wait([&socket](boost::system::error_code error) {
    if (!error) socket.close(error);
  });
  co_await asio::async_connect(socket, endpoints, asio::use_awaitable);
  timer.cancel();
  co_return socket;
}

asio::awaitable<Json> PeerHandshake(Connection& connection, const std::string& secret,
                                    const std::string& role, const std::string& name, Json hello) {
  std::optional<Json> first;
  try {
    first = co_await connection.Read(kHandshakeTimeout);
  } catch (const boost::system::system_error& error) {
    // A coordinator that serves TLS waits for a TLS hello and then hangs up
    // on a plain peer.
    throw Error("the coordinator closed the connection before its challenge (" +
                std::string(error.what()) + "); if it serves TLS, connect with --tls-ca");
  }
  const Json& challenge = *first;
  if (MessageType(challenge) == "refused") {
    throw Refused("the coordinator refused: " + Field<std::string>(challenge, "reason"),
                  /*temporary=*/true);
  }
  if (MessageType(challenge) != "challenge") {
    throw ProtocolError("expected a challenge, got '" + Abbreviated(MessageType(challenge)) + "'");
  }
  if (Field<int>(challenge, "protocol") != kProtocolVersion) {
    throw Refused("the coordinator speaks protocol " +
                  std::to_string(Field<int>(challenge, "protocol")) + ", this build " +
                  std::to_string(kProtocolVersion));
  }
  const std::string server_nonce = Field<std::string>(challenge, "nonce");
  const std::string nonce = RandomNonce();
  hello["type"] = "hello";
  hello["protocol"] = kProtocolVersion;
  hello["role"] = role;
  hello["name"] = name;
  hello["nonce"] = nonce;
  hello["proof"] = PeerProof(secret, server_nonce, nonce, role, name);
  connection.Send(hello);
  const Json reply = co_await connection.Read(kHandshakeTimeout);
  if (MessageType(reply) == "refused") {
    throw Refused("the coordinator refused: " + Field<std::string>(reply, "reason"));
  }
  if (MessageType(reply) != "welcome" ||
      !ProofsEqual(Field<std::string>(reply, "proof"),
                   CoordinatorProof(secret, server_nonce, nonce))) {
    throw Refused("the coordinator did not prove it holds the secret");
  }
  co_return reply;
}

}  // namespace nimble::protocol
