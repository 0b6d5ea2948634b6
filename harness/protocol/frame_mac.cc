#include "harness/protocol/frame_mac.h"

#include "harness/protocol/auth.h"
#include "harness/protocol/frame.h"

namespace nimble::protocol {

namespace {

constexpr size_t kSequenceBytes = 8;
constexpr size_t kMacBytes = 32;

std::string SequenceBytes(uint64_t sequence) {
  std::string bytes(kSequenceBytes, '\0');
  for (size_t i = 0; i < kSequenceBytes; ++i) {
    bytes[i] = static_cast<char>(sequence >> (8 * (kSequenceBytes - 1 - i)) & 0xff);
  }
  return bytes;
}

uint64_t SequenceOf(const std::string& body) {
  uint64_t sequence = 0;
  for (size_t i = 0; i < kSequenceBytes; ++i) {
    sequence = sequence << 8 | static_cast<unsigned char>(body[i]);
  }
  return sequence;
}

void CheckSealedSize(const std::string& body) {
  if (body.size() < kSealOverhead + 1) {
    throw ProtocolError("a sealed frame of " + std::to_string(body.size()) +
                        " bytes (shorter than its sequence number, a message and its MAC)");
  }
}

}  // namespace

FrameMac::FrameMac(std::string send_key, std::string receive_key)
    : send_key_(std::move(send_key)), receive_key_(std::move(receive_key)) {}

std::string FrameMac::Seal(const std::string& message) {
  // Refused before it takes a number, so the frames after it stay in order.
  if (message.size() + kSealOverhead > kMaxFrameBytes) {
    throw ProtocolError("a message of " + std::to_string(message.size()) +
                        " bytes (over the frame limit once sealed)");
  }
  std::string body = SequenceBytes(sent_++) + message;
  body += HmacSha256(send_key_, body);
  return body;
}

std::string FrameMac::Open(const std::string& body) {
  if (!IsSealed(body)) throw ProtocolError("an unauthenticated frame after the handshake");
  CheckSealedSize(body);
  const size_t signed_bytes = body.size() - kMacBytes;
  const std::string signed_part = body.substr(0, signed_bytes);
  if (!ProofsEqual(body.substr(signed_bytes), HmacSha256(receive_key_, signed_part))) {
    throw ProtocolError("frame " + std::to_string(received_) +
                        " has a wrong MAC (altered on the way, or not sent by a holder of the "
                        "secret on this connection)");
  }
  const uint64_t sequence = SequenceOf(body);
  if (sequence != received_) {
    throw ProtocolError("frame number " + std::to_string(sequence) + " where " +
                        std::to_string(received_) + " was due (replayed or reordered)");
  }
  ++received_;
  return signed_part.substr(kSequenceBytes);
}

bool IsSealed(const std::string& body) {
  return !body.empty() && body[0] != '{';
}

std::string UnverifiedMessage(const std::string& body) {
  CheckSealedSize(body);
  return body.substr(kSequenceBytes, body.size() - kSealOverhead);
}

}  // namespace nimble::protocol
