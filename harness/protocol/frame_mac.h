// Integrity for every frame after the challenge (docs/harness.md). A sealed
// frame's body is an 8-byte big-endian sequence number, the message, and
// HMAC-SHA256 over the sequence number and the message under the key of its
// direction (auth.h's SessionKeys). So a byte flipped on the wire, a frame
// forged without the secret, a frame of another connection, one reflected
// back to its sender, or one replayed or reordered within the connection,
// is detected and the connection closed. It protects integrity only: TLS
// adds confidentiality.
#pragma once

#include <cstdint>
#include <string>

namespace nimble::protocol {

// The bytes a sealed body adds to its message.
constexpr size_t kSealOverhead = 8 + 32;

class FrameMac {
 public:
  // `send_key` seals what this side sends, `receive_key` opens what it reads.
  FrameMac(std::string send_key, std::string receive_key);

  // The body of the next frame to send carrying `message` (numbered in the
  // order of the calls, which is the order the frames are written).
  std::string Seal(const std::string& message);
  // The message of the next frame read: throws ProtocolError when its MAC
  // is wrong, or when it is genuine but not the one due (replayed or
  // reordered), or when it is not sealed at all.
  std::string Open(const std::string& body);

 private:
  std::string send_key_;
  std::string receive_key_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
};

// Whether `body` is sealed (a plain message starts with '{'; a sequence
// number's first byte is 0 for the first 2^56 frames).
bool IsSealed(const std::string& body);

// The message of a sealed body, before its MAC is checked: the coordinator
// reads the peer's nonce from the hello to derive the keys that check it.
// Throws ProtocolError when `body` is too short to be sealed.
std::string UnverifiedMessage(const std::string& body);

}  // namespace nimble::protocol
