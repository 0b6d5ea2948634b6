#include "harness/protocol/frame.h"

#include <boost/asio/redirect_error.hpp>

namespace nimble::protocol {

namespace asio = boost::asio;

namespace {

void CheckLength(uint32_t length) {
  if (length == 0 || length > kMaxFrameBytes) {
    throw ProtocolError("frame of " + std::to_string(length) + " bytes (the limit is " +
                        std::to_string(kMaxFrameBytes) + ")");
  }
}

}  // namespace

uint32_t DecodeLength(const unsigned char (&header)[4]) {
  const uint32_t length = uint32_t{header[0]} << 24 | uint32_t{header[1]} << 16 |
                          uint32_t{header[2]} << 8 | uint32_t{header[3]};
  CheckLength(length);
  return length;
}

Json ParseMessage(const std::string& body) {
  const Json::parser_callback_t depth_limit = [](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxMessageDepth) {
      throw ProtocolError("a message nested deeper than " + std::to_string(kMaxMessageDepth) +
                          " levels");
    }
    return true;
  };
  Json message = Json::parse(body, depth_limit, /*allow_exceptions=*/false);
  if (message.is_discarded()) throw ProtocolError("a frame that is not JSON");
  if (!message.is_object() || !message.contains("type") || !message["type"].is_string()) {
    throw ProtocolError("a message that is not an object with a string 'type'");
  }
  return message;
}

std::string FrameOf(const std::string& body) {
  CheckLength(static_cast<uint32_t>(std::min<size_t>(body.size(), UINT32_MAX)));
  const auto length = static_cast<uint32_t>(body.size());
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(length >> (24 - 8 * i) & 0xff);
  return frame + body;
}

std::string EncodeFrame(const Json& message) {
  return FrameOf(message.dump());
}

Deadline::Deadline(Socket& socket) : socket_(socket), timer_(socket.get_executor()) {
  Disarm();
}

asio::awaitable<void> Deadline::Watch() {
  while (socket_.is_open()) {
    boost::system::error_code error;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, error));
    if (timer_.expiry() <= std::chrono::steady_clock::now()) {
      expired_ = true;
      socket_.close(error);
    }
  }
}

void Deadline::Arm(std::chrono::steady_clock::duration timeout) {
  timer_.expires_after(timeout);
}

void Deadline::Disarm() {
  timer_.expires_at(std::chrono::steady_clock::time_point::max());
}

std::string Abbreviated(const std::string& text) {
  constexpr size_t kMaxQuoted = 80;
  if (text.size() <= kMaxQuoted) return text;
  return text.substr(0, kMaxQuoted) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string MessageType(const Json& message) {
  const auto found = message.find("type");
  if (found == message.end() || !found->is_string()) {
    throw ProtocolError("a message without a string 'type'");
  }
  return found->get<std::string>();
}

}  // namespace nimble::protocol
