#include "harness/protocol/auth.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "nimble/vm/error.h"

namespace nimble::protocol {

namespace {

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text(2 * size, '\0');
  for (size_t i = 0; i < size; ++i) {
    text[2 * i] = kDigits[bytes[i] >> 4];
    text[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return text;
}

}  // namespace

std::string ReadSecretFile(const std::string& path) {
  struct stat status {};
  if (stat(path.c_str(), &status) != 0) throw Error(path + ": cannot read the secret file");
  if (status.st_mode & (S_IRWXG | S_IRWXO)) {
    throw Error(path + ": the secret file is readable by others (chmod 600 it)");
  }
  std::ifstream file(path, std::ios::binary);
  std::stringstream content;
  content << file.rdbuf();
  std::string secret = content.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (!file || secret.empty()) throw Error(path + ": the secret file is empty or unreadable");
  return secret;
}

std::string RandomNonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) throw Error("no random bytes from OpenSSL");
  return Hex(bytes, sizeof(bytes));
}

std::string HmacSha256(const std::string& key, const std::string& message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest,
            &size)) {
    throw Error("HMAC-SHA256 failed in OpenSSL");
  }
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string HmacSha256Hex(const std::string& key, const std::string& message) {
  const std::string digest = HmacSha256(key, message);
  return Hex(reinterpret_cast<const unsigned char*>(digest.data()), digest.size());
}

bool ProofsEqual(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string HkdfSha256(const std::string& secret, const std::string& salt,
                       const std::string& info) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* context = kdf ? EVP_KDF_CTX_new(kdf) : nullptr;
  EVP_KDF_free(kdf);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>("SHA256"), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(salt.data()),
                                        salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()),
                                        info.size()),
      OSSL_PARAM_construct_end()};
  unsigned char key[32];
  const bool derived = context && EVP_KDF_derive(context, key, sizeof(key), params) == 1;
  EVP_KDF_CTX_free(context);
  if (!derived) throw Error("HKDF-SHA256 failed in OpenSSL");
  return std::string(reinterpret_cast<const char*>(key), sizeof(key));
}

SessionKeys DeriveSessionKeys(const std::string& secret, const std::string& server_nonce,
                              const std::string& peer_nonce) {
  const std::string salt = server_nonce + "\n" + peer_nonce;
  return {HkdfSha256(secret, salt, "nimble frames to the coordinator"),
          HkdfSha256(secret, salt, "nimble frames to the peer")};
}

}  // namespace nimble::protocol
