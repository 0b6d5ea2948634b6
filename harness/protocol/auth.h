// Proof of the shared secret without sending it: each side sends a random
// nonce, both derive this connection's keys from the secret and the two
// nonces, and every frame from the hello on carries a MAC under them
// (frame_mac.h), so holding the secret is proved by the first frame each
// side sends and every later one. Keys are fresh per connection (a frame
// cannot be replayed on another) and differ per direction (nor reflected
// back). Comparisons are constant-time. OpenSSL does the cryptography.
#pragma once

#include <string>

namespace nimble::protocol {

// The secret in `path`: its bytes, without a final newline. Throws
// nimble::Error when it is unreadable, empty, or readable by others than
// its owner (a secret in a world-readable file is no secret).
std::string ReadSecretFile(const std::string& path);

// 32 random bytes from the OS's CSPRNG, as lowercase hex.
std::string RandomNonce();

// HMAC-SHA256 of `message` under `key`: its 32 bytes, or as lowercase hex.
std::string HmacSha256(const std::string& key, const std::string& message);
std::string HmacSha256Hex(const std::string& key, const std::string& message);

// Constant-time equality (for proofs; lengths are not secret).
bool ProofsEqual(const std::string& a, const std::string& b);

// HKDF-SHA256 (RFC 5869) of `key` with `salt` and `info`: 32 bytes.
std::string HkdfSha256(const std::string& key, const std::string& salt, const std::string& info);

// One connection's MAC keys (32 bytes each), one per direction: HKDF-SHA256
// (RFC 5869) of the shared secret, salted with the coordinator's nonce and
// the peer's, with the direction as the info.
struct SessionKeys {
  std::string to_coordinator;
  std::string to_peer;
};
SessionKeys DeriveSessionKeys(const std::string& secret, const std::string& server_nonce,
                              const std::string& peer_nonce);

}  // namespace nimble::protocol
