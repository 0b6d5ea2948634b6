// The wire format between the coordinator, its agents and its clients:
// frames of a 4-byte big-endian length followed by that many bytes of one
// JSON object with a "type" member (docs/harness.md lists every message).
// Every read is bounded twice: a frame larger than the cap is refused before
// a byte of it is buffered, and a read that does not finish by its deadline
// closes the connection, so neither a huge nor a slow peer can hold memory
// or a connection.
#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "nimble/vm/error.h"

namespace nimble::protocol {

using Json = nlohmann::json;
using Socket = boost::asio::ip::tcp::socket;

// The largest frame either side accepts (the biggest message is a run's
// result: a few hundred figures).
constexpr uint32_t kMaxFrameBytes = 1 << 20;

// A malformed frame or message: the peer is cut off with this reason.
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& reason) : Error(reason) {}
};

// The bytes of one frame carrying `message`.
std::string EncodeFrame(const Json& message);

// Closes `socket` when an operation takes longer than its deadline: a timer
// that every operation re-arms. One per direction of a connection (reads
// and writes overlap), started with Watch() beside its coroutines.
class Deadline {
 public:
  explicit Deadline(Socket& socket);
  // Starts watching; completes when the socket is closed.
  boost::asio::awaitable<void> Watch();
  // The next operation must finish within `timeout`.
  void Arm(std::chrono::steady_clock::duration timeout);
  // No operation is pending: wait forever.
  void Disarm();
  bool expired() const { return expired_; }

 private:
  Socket& socket_;
  boost::asio::steady_timer timer_;
  bool expired_ = false;
};

// The frame's body length from its 4-byte header; ProtocolError when it is
// 0 or over kMaxFrameBytes.
uint32_t DecodeLength(const unsigned char (&header)[4]);
// The message in a frame's body; ProtocolError when it is not a JSON
// object with a string "type".
Json ParseMessage(const std::string& body);

// Reads one frame from `stream` (a TCP socket or a TLS stream) within
// `timeout`. Throws ProtocolError for an oversized frame or bytes that are
// not a message, and boost::system::system_error when the connection fails
// or the deadline closes it.
template <typename Stream>
boost::asio::awaitable<Json> ReadMessage(Stream& stream, Deadline& deadline,
                                         std::chrono::steady_clock::duration timeout) {
  deadline.Arm(timeout);
  unsigned char header[4];
  co_await boost::asio::async_read(stream, boost::asio::buffer(header), boost::asio::use_awaitable);
  std::string body(DecodeLength(header), '\0');
  co_await boost::asio::async_read(stream, boost::asio::buffer(body), boost::asio::use_awaitable);
  deadline.Disarm();
  co_return ParseMessage(body);
}

// The message's "type", or ProtocolError.
std::string MessageType(const Json& message);

// Member `key` of `message` as T, or ProtocolError naming the message type
// and the member.
template <typename T>
T Field(const Json& message, const char* key) {
  // Named by the message's type when it has one (members of nested records
  // have none).
  const auto type = message.is_object() ? message.find("type") : message.end();
  const std::string where = type != message.end() && type->is_string()
                                ? "'" + type->get<std::string>() + "' message"
                                : "a record";
  const auto found = message.is_object() ? message.find(key) : message.end();
  if (found == message.end()) throw ProtocolError(where + " without '" + key + "'");
  try {
    return found->get<T>();
  } catch (const nlohmann::json::exception&) {
    throw ProtocolError(where + ": '" + key + "' has the wrong type");
  }
}

}  // namespace nimble::protocol
