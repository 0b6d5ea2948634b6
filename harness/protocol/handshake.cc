#include "harness/protocol/handshake.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

#include "harness/protocol/auth.h"
#include "harness/protocol/frame_mac.h"
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
  const SessionKeys keys = DeriveSessionKeys(secret, server_nonce, nonce);
  connection.Authenticate(std::make_unique<FrameMac>(keys.to_coordinator, keys.to_peer));
  hello["type"] = "hello";
  hello["protocol"] = kProtocolVersion;
  hello["role"] = role;
  hello["name"] = name;
  hello["nonce"] = nonce;
  connection.Send(hello);
  const std::string body = co_await connection.ReadBody(kHandshakeTimeout);
  if (!IsSealed(body)) {
    // A refusal comes in the clear: the coordinator may not have keys.
    const Json reply = ParseMessage(body);
    if (MessageType(reply) == "refused") {
      throw Refused("the coordinator refused: " + Field<std::string>(reply, "reason"));
    }
    throw ProtocolError("an unauthenticated '" + Abbreviated(MessageType(reply)) +
                        "' from the coordinator");
  }
  std::optional<Json> reply;
  try {
    reply = connection.Open(body);
  } catch (const ProtocolError&) {
    throw Refused("the coordinator did not prove it holds the secret (its welcome fails its MAC)");
  }
  if (MessageType(*reply) != "welcome") {
    throw ProtocolError("expected a welcome, got '" + Abbreviated(MessageType(*reply)) + "'");
  }
  co_return *reply;
}

asio::awaitable<Admission> CoordinatorHandshake(
    Connection& connection, const std::string& secret, std::chrono::steady_clock::duration timeout,
    const std::function<std::string(const Json& hello)>& why_refused, Json welcome) {
  const std::string nonce = RandomNonce();
  connection.Send({{"type", "challenge"}, {"protocol", kProtocolVersion}, {"nonce", nonce}});
  const std::string body = co_await connection.ReadBody(timeout);
  // The hello is read before its MAC is checked: the keys that check it
  // need the peer's nonce inside it. Nothing is acted on until it checks.
  Admission admission{ParseMessage(IsSealed(body) ? UnverifiedMessage(body) : body), ""};
  const Json& hello = admission.hello;
  std::unique_ptr<FrameMac> mac;
  if (MessageType(hello) != "hello") {
    admission.refusal = "expected hello, got '" + Abbreviated(MessageType(hello)) + "'";
  } else if (Field<int>(hello, "protocol") != kProtocolVersion) {
    admission.refusal = "protocol " + std::to_string(Field<int>(hello, "protocol")) +
                        " (this coordinator speaks " + std::to_string(kProtocolVersion) + ")";
  } else if (!IsSealed(body)) {
    admission.refusal = "a hello without a MAC";
  } else {
    const SessionKeys keys = DeriveSessionKeys(secret, nonce, Field<std::string>(hello, "nonce"));
    mac = std::make_unique<FrameMac>(keys.to_peer, keys.to_coordinator);
    bool proved = true;
    try {
      mac->Open(body);
    } catch (const ProtocolError&) {
      proved = false;
    }
    admission.refusal =
        proved ? why_refused(hello) : "wrong proof of the shared secret (the hello fails its MAC)";
  }
  if (!admission.refusal.empty()) {
    connection.Send({{"type", "refused"}, {"reason", admission.refusal}});
    co_await connection.Drain();
    co_return admission;
  }
  connection.Authenticate(std::move(mac));
  welcome["type"] = "welcome";
  connection.Send(welcome);
  co_return admission;
}

}  // namespace nimble::protocol
