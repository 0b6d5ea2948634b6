// Proof of the shared secret without sending it: each side sends a random
// nonce, and each proves it holds the secret with HMAC-SHA256 over both
// nonces and its role (so a proof can neither be replayed on another
// connection nor reflected back as the other side's). Comparisons are
// constant-time. OpenSSL does the cryptography.
#pragma once

#include <string>

namespace nimble::protocol {

// The secret in `path`: its bytes, without a final newline. Throws
// nimble::Error when it is unreadable, empty, or readable by others than
// its owner (a secret in a world-readable file is no secret).
std::string ReadSecretFile(const std::string& path);

// 32 random bytes from the OS's CSPRNG, as lowercase hex.
std::string RandomNonce();

// HMAC-SHA256 of `message` under `secret`, as lowercase hex.
std::string HmacSha256Hex(const std::string& secret, const std::string& message);

// Constant-time equality (for proofs; lengths are not secret).
bool ProofsEqual(const std::string& a, const std::string& b);

// What a connecting peer (an agent or a client) proves, and what the
// coordinator proves back.
std::string PeerProof(const std::string& secret, const std::string& server_nonce,
                      const std::string& peer_nonce, const std::string& role,
                      const std::string& name);
std::string CoordinatorProof(const std::string& secret, const std::string& server_nonce,
                             const std::string& peer_nonce);

}  // namespace nimble::protocol
