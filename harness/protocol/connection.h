// One established connection of the protocol, either side: plain TCP or
// TLS over it, every frame sealed with a MAC once the handshake has keys
// (frame_mac.h), reads with a deadline, writes queued and sent in order by
// one writer (so heartbeats, results and replies never interleave their
// bytes), and a close that wakes every waiter. Shared by the coordinator's
// sessions, the agent and the command-line client.
#pragma once

#include <boost/asio/ssl/stream.hpp>
#include <deque>
#include <memory>
#include <string>
#include <variant>

#include "harness/protocol/frame.h"
#include "harness/protocol/frame_mac.h"
#include "harness/protocol/tls.h"

namespace nimble::protocol {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Duration = std::chrono::steady_clock::duration;

  // `write_timeout` bounds each queued write: a peer that stops reading is
  // cut off instead of growing the queue. With `tls`, the bytes go through
  // TLS once TlsHandshake() has run.
  Connection(Socket socket, Duration write_timeout, TlsContext* tls = nullptr);

  // Starts the deadlines' watchdogs and the writer on the socket's executor.
  void Start();

  // The TLS handshake, within `timeout` (nothing without TLS). A client
  // checks the server's certificate against `server_name` (a host name or
  // an IP address). Throws nimble::Error naming OpenSSL's reason.
  boost::asio::awaitable<void> TlsHandshake(bool as_server, const std::string& server_name,
                                            Duration timeout);

  // From now on every frame sent is sealed and every frame read must be.
  void Authenticate(std::unique_ptr<FrameMac> mac);
  bool authenticated() const { return mac_ != nullptr; }

  // The next message, within `timeout` (throws like ReadMessage, and
  // ProtocolError for a frame that fails its MAC: see frame_mac.h).
  boost::asio::awaitable<Json> Read(Duration timeout);
  // The next frame's body, unchecked, and the message of a body read so
  // (opened when authenticated): for the handshake, which must look at a
  // frame before it has the keys to check it.
  boost::asio::awaitable<std::string> ReadBody(Duration timeout);
  Json Open(const std::string& body);
  // Queues `message` (sealed when authenticated); dropped when the
  // connection is closed.
  void Send(const Json& message);
  // Completes when every queued message has been written (or the
  // connection closed), e.g. before closing after a final reply.
  boost::asio::awaitable<void> Drain();
  void Close();
  bool open() const { return socket().is_open(); }
  // "address:port" of the peer, for logs.
  const std::string& peer() const { return peer_; }

 private:
  using TlsStream = boost::asio::ssl::stream<Socket>;

  Socket& socket();
  const Socket& socket() const;
  boost::asio::awaitable<void> WriteLoop();

  std::variant<Socket, TlsStream> stream_;
  std::string peer_;
  Duration write_timeout_;
  Deadline read_deadline_;
  Deadline write_deadline_;
  std::unique_ptr<FrameMac> mac_;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  boost::asio::steady_timer wake_writer_;
  boost::asio::steady_timer drained_;
};

}  // namespace nimble::protocol
