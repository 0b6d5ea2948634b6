// The handshake both sides run before anything else (docs/harness.md):
//   coordinator: {"type":"challenge","protocol":1,"nonce":N}
//   peer:        {"type":"hello","protocol":1,"role":"agent"|"client","name":..,
//                 "nonce":M,"proof":PeerProof(N,M,role,name), ...}
//   coordinator: {"type":"welcome","proof":CoordinatorProof(N,M),...}
//                or {"type":"refused","reason":...} and the connection closes.
// Each side checks the other's proof, so neither talks to an impostor.
#pragma once

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
// adds type, protocol, role, name, nonce and proof) and returns the
// coordinator's welcome. Throws Refused when refused (with the
// coordinator's reason; temporary when in place of the challenge) or when
// the coordinator's proof is wrong.
boost::asio::awaitable<Json> PeerHandshake(Connection& connection, const std::string& secret,
                                           const std::string& role, const std::string& name,
                                           Json hello);

}  // namespace nimble::protocol
