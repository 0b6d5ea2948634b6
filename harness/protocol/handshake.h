// The handshake both sides run before anything else (docs/harness.md):
//   coordinator: {"type":"challenge","protocol":2,"nonce":N}        in the clear
//   peer:        {"type":"hello","protocol":2,"role":"agent"|"client","name":..,
//                 "nonce":M, ...}                                   sealed
//   coordinator: {"type":"welcome",...}                             sealed
//                or {"type":"refused","reason":...} in the clear, and the
//                connection closes.
// The hello and everything after it are sealed under keys derived from the
// secret and both nonces (auth.h, frame_mac.h): the hello's MAC proves the
// peer holds the secret, the welcome's that the coordinator does, so neither
// talks to an impostor, and nothing either sends can be altered after.
#pragma once

#include <functional>
#include <string>

#include "harness/protocol/connection.h"
#include "nimble/vm/error.h"

namespace nimble::protocol {

// "host:port" split; throws nimble::Error naming the text when malformed.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
HostPort ParseHostPort(const std::string& text);

// Connects to `address` within `timeout`, throws boost::system::system_error.
boost::asio::awaitable<Socket> ConnectTo(const HostPort& address,
                                         std::chrono::steady_clock::duration timeout);

// The coordinator refused this peer, or could not prove it holds the
// secret: a configuration error, not worth retrying, unless `temporary`. A
// refusal in place of the challenge (the coordinator at its connection
// limit) is temporary: it comes before either side has proved anything, so
// it says nothing about this peer's secret or version, and anyone who can
// reach the peer could send one.
class Refused : public Error {
 public:
  explicit Refused(const std::string& reason, bool temporary = false)
      : Error(reason), temporary_(temporary) {}
  bool temporary() const { return temporary_; }

 private:
  bool temporary_;
};

// The peer's side: sends `hello` (its role-specific members; the handshake
// adds type, protocol, role, name and nonce), seals the connection, and
// returns the coordinator's welcome. Throws Refused when refused (with the
// coordinator's reason; temporary when in place of the challenge) or when
// the welcome fails its MAC (the coordinator does not hold the secret).
boost::asio::awaitable<Json> PeerHandshake(Connection& connection, const std::string& secret,
                                           const std::string& role, const std::string& name,
                                           Json hello);

// The coordinator's side: sends the challenge, reads the hello and admits
// it when its protocol version is this build's, its MAC checks under the
// keys of `secret` and both nonces, and `why_refused(hello)` is "". Then it
// answers `welcome` (with the members of `welcome`) and the connection is
// sealed both ways; otherwise it answers `refused` in the clear. Throws
// ProtocolError for a frame that is not a hello (or lacks its members) and
// boost::system::system_error when the peer is gone or past `timeout`.
struct Admission {
  Json hello;
  std::string refusal;  // "": admitted
};
boost::asio::awaitable<Admission> CoordinatorHandshake(
    Connection& connection, const std::string& secret, std::chrono::steady_clock::duration timeout,
    const std::function<std::string(const Json& hello)>& why_refused, Json welcome);

}  // namespace nimble::protocol
