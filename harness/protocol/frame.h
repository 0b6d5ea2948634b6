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
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>

#include "nimble/vm/error.h"

namespace nimble::protocol {

using Json = nlohmann::json;
using Socket = boost::asio::ip::tcp::socket;

// The largest frame either side accepts (the biggest message is a run's
// result: a few hundred figures).
constexpr uint32_t kMaxFrameBytes = 1 << 20;

// The longest reason an error frame carries and the job store keeps of a
// failed attempt's: an agent's three 900 KB reasons, joined in the job's
// error, made every later `status` reply larger than a frame.
constexpr size_t kMaxReasonBytes = 4096;

// A malformed frame or message: the peer is cut off with this reason.
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& reason) : Error(reason) {}
};

// The bytes of one frame with `body` (a message, or a sealed one:
// frame_mac.h), and of one carrying `message` in the clear.
std::string FrameOf(const std::string& body);
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

// Reads one frame's body from `stream` (a TCP socket or a TLS stream)
// within `timeout`. Throws ProtocolError for an oversized frame, and
// boost::system::system_error when the connection fails or the deadline
// closes it.
template <typename Stream>
boost::asio::awaitable<std::string> ReadFrameBody(Stream& stream, Deadline& deadline,
                                                  std::chrono::steady_clock::duration timeout) {
  deadline.Arm(timeout);
  unsigned char header[4];
  co_await boost::asio::async_read(stream, boost::asio::buffer(header), boost::asio::use_awaitable);
  std::string body(DecodeLength(header), '\0');
  co_await boost::asio::async_read(stream, boost::asio::buffer(body), boost::asio::use_awaitable);
  deadline.Disarm();
  co_return body;
}

// Reads one frame in the clear and its message (throws like ReadFrameBody,
// and ProtocolError for bytes that are not a message).
template <typename Stream>
boost::asio::awaitable<Json> ReadMessage(Stream& stream, Deadline& deadline,
                                         std::chrono::steady_clock::duration timeout) {
  co_return ParseMessage(co_await ReadFrameBody(stream, deadline, timeout));
}

// The message's "type", or ProtocolError.
std::string MessageType(const Json& message);

// The deepest nesting of arrays and objects a message may have (a job's
// options nest a few levels): a 200 KB frame of 100,000 nested arrays
// overflowed the stack of the code that copies it.
constexpr int kMaxMessageDepth = 64;

// `text` as a message may quote it: at most 80 characters, and its length
// when cut (an unknown type of 1 MiB, repeated in the error frame, made a
// frame over the limit).
std::string Abbreviated(const std::string& text);

// `value` as T where it is one exactly: an integer of T's range for an
// integral T (not 1.9, nor 2^64 - 1 as -1), a number for a floating T, an
// array for a vector; nullopt otherwise.
template <typename T>
std::optional<T> Exactly(const Json& value) {
  if constexpr (std::is_same_v<T, Json>) {
    return value;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) return std::nullopt;
    return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const auto number = value.get<uint64_t>();
      if (number > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
      return static_cast<T>(number);
    }
    if (!value.is_number_integer()) return std::nullopt;
    const auto number = value.get<int64_t>();
    if (number < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (number > 0 &&
         static_cast<uint64_t>(number) > static_cast<uint64_t>(std::numeric_limits<T>::max()))) {
      return std::nullopt;
    }
    return static_cast<T>(number);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number()) return std::nullopt;
    return value.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) return std::nullopt;
    return value.get<std::string>();
  } else {
    if (!value.is_array()) return std::nullopt;
    T elements;
    for (const Json& element : value) {
      std::optional<typename T::value_type> exact = Exactly<typename T::value_type>(element);
      if (!exact) return std::nullopt;
      elements.push_back(std::move(*exact));
    }
    return elements;
  }
}

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
  std::optional<T> value = Exactly<T>(*found);
  if (!value) throw ProtocolError(where + ": '" + key + "' has the wrong type or range");
  return std::move(*value);
}

}  // namespace nimble::protocol
