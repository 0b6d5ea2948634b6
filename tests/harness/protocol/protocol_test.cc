// The protocol layer over real loopback sockets: frames round-trip and are
// bounded, malformed bytes are refused, a slow peer is cut off by the read
// deadline, HMAC-SHA256 and HKDF match their RFCs, sealed frames detect a
// flipped byte, a replay, a reorder and a reflection, secret files are
// checked, and the handshake refuses a wrong secret on both sides.
#include <sys/stat.h>

// Boost 1.74's awaitable.hpp uses std::exchange without including it.
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/protocol/auth.h"
#include "harness/protocol/connection.h"
#include "harness/protocol/frame_mac.h"
#include "harness/protocol/handshake.h"
#include "harness/protocol/messages.h"
#include "harness/protocol/tls.h"
#include "nimble/vm/error.h"
#include "tests/error_of.h"

namespace nimble::protocol {
namespace {

namespace asio = boost::asio;
using ::testing::HasSubstr;
using tcp = asio::ip::tcp;

// A connected pair of loopback sockets on one io_context.
struct SocketPair {
  asio::io_context io;
  Socket client{io};
  Socket server{io};

  SocketPair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client.connect(acceptor.local_endpoint());
    acceptor.accept(server);
  }

  // Runs `operation` on the io_context to completion.
  template <typename T>
  T Await(asio::awaitable<T> operation) {
    auto future = asio::co_spawn(io, std::move(operation), asio::use_future);
    io.restart();
    while (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io.run_one();
    return future.get();
  }
};

TEST(Frame, RoundTripsThroughAConnection) {
  SocketPair pair;
  auto sender = std::make_shared<Connection>(std::move(pair.client), std::chrono::seconds(5));
  auto receiver = std::make_shared<Connection>(std::move(pair.server), std::chrono::seconds(5));
  sender->Start();
  receiver->Start();
  sender->Send({{"type", "hello"}, {"n", 1}});
  sender->Send({{"type", "world"}, {"text", std::string(100000, 'x')}});
  const Json first = pair.Await(receiver->Read(std::chrono::seconds(5)));
  const Json second = pair.Await(receiver->Read(std::chrono::seconds(5)));
  EXPECT_EQ(first["type"], "hello");
  EXPECT_EQ(first["n"], 1);
  EXPECT_EQ(second["text"].get<std::string>().size(), 100000u);
  sender->Close();
  receiver->Close();
}

TEST(Frame, EncodesTheLengthBigEndian) {
  const std::string frame = EncodeFrame({{"type", "x"}});
  ASSERT_GE(frame.size(), 4u);
  EXPECT_EQ(frame.substr(0, 4), std::string("\0\0\0\x0c", 4));
  EXPECT_EQ(frame.substr(4), R"({"type":"x"})");
}

// Reads one message from raw `bytes` written by the peer.
std::string ErrorReading(const std::string& bytes) {
  SocketPair pair;
  asio::write(pair.client, asio::buffer(bytes));
  Deadline deadline(pair.server);
  asio::co_spawn(pair.io, deadline.Watch(), asio::detached);
  try {
    pair.Await(ReadMessage(pair.server, deadline, std::chrono::seconds(5)));
  } catch (const std::exception& error) {
    pair.server.close();
    pair.io.poll();
    return error.what();
  }
  pair.server.close();
  return "";
}

TEST(Frame, RefusesOversizedFramesBeforeReadingThem) {
  EXPECT_THAT(ErrorReading(std::string("\xff\xff\xff\xff", 4)),
              HasSubstr("frame of 4294967295 bytes (the limit is 1048576)"));
  EXPECT_THAT(ErrorReading(std::string("\0\0\0\0", 4)), HasSubstr("frame of 0 bytes"));
}

TEST(Frame, RefusesWhatIsNotAMessage) {
  auto framed = [](const std::string& body) {
    std::string frame(4, '\0');
    frame[3] = static_cast<char>(body.size());
    return frame + body;
  };
  EXPECT_THAT(ErrorReading(framed("{not json")), HasSubstr("not JSON"));
  EXPECT_THAT(ErrorReading(framed("[1,2]")), HasSubstr("not an object with a string 'type'"));
  EXPECT_THAT(ErrorReading(framed(R"({"type":3})")), HasSubstr("string 'type'"));
}

// Nesting past kMaxMessageDepth is refused as the frame is parsed: 100,000
// nested arrays (200 KB) crashed the coordinator that copied them.
TEST(Frame, RefusesMessagesNestedTooDeeply) {
  const auto nested = [](int depth) {
    return R"({"type":"jobs","job_ids":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
  };
  EXPECT_NO_THROW(ParseMessage(nested(kMaxMessageDepth - 1)));
  EXPECT_THAT(ErrorOf([&] { ParseMessage(nested(100000)); }),
              HasSubstr("a message nested deeper than 64 levels"));
}

TEST(Frame, ASlowPeerIsCutOffAtTheDeadline) {
  SocketPair pair;
  // Two bytes of a header, then nothing: the read must not wait forever.
  asio::write(pair.client, asio::buffer(std::string("\0\0", 2)));
  Deadline deadline(pair.server);
  asio::co_spawn(pair.io, deadline.Watch(), asio::detached);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(pair.Await(ReadMessage(pair.server, deadline, std::chrono::milliseconds(200))),
               boost::system::system_error);
  EXPECT_TRUE(deadline.expired());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_FALSE(pair.server.is_open());
}

TEST(Frame, FieldsNameTheMessageAndTheMember) {
  const Json job = {{"type", "job"}, {"job_id", "seven"}, {"running", {{{"job_id", 1}}}}};
  EXPECT_THAT(ErrorOf([&] { Field<int64_t>(job, "job_id"); }),
              HasSubstr("'job' message: 'job_id' has the wrong type"));
  EXPECT_THAT(ErrorOf([&] { Field<int64_t>(job, "attempt"); }),
              HasSubstr("'job' message without 'attempt'"));
  EXPECT_THAT(ErrorOf([&] { Field<int64_t>(job["running"][0], "attempt"); }),
              HasSubstr("a record without 'attempt'"));
  EXPECT_THAT(ErrorOf([] { Field<int64_t>(Json("text"), "attempt"); }),
              HasSubstr("a record without 'attempt'"));
}

// A member is read only as what it is exactly: an integer in its type's range
// (1.9 was read as 1, 2^64 - 1 as -1, 2^32 + 1 as protocol 1), an array for
// a list (null was an empty one).
TEST(Frame, FieldsTakeNoConvertedValues) {
  const Json hello = {{"type", "hello"}, {"protocol", (int64_t{1} << 32) + 1},
                      {"fraction", 1.9}, {"huge", UINT64_MAX},
                      {"ids", nullptr},  {"names", {"a", 1}},
                      {"whole", 7}};
  for (const char* key : {"protocol", "fraction", "huge"}) {
    EXPECT_THAT(
        ErrorOf([&] { Field<int>(hello, key); }),
        HasSubstr(std::string("'hello' message: '") + key + "' has the wrong type or range"));
  }
  EXPECT_THAT(ErrorOf([&] { Field<int64_t>(hello, "huge"); }), HasSubstr("'huge' has the wrong"));
  EXPECT_THAT(ErrorOf([&] { Field<std::vector<int64_t>>(hello, "ids"); }),
              HasSubstr("'ids' has the wrong"));
  EXPECT_THAT(ErrorOf([&] { Field<std::vector<std::string>>(hello, "names"); }),
              HasSubstr("'names' has the wrong"));
  EXPECT_EQ(Field<int>(hello, "whole"), 7);
  EXPECT_EQ(Field<double>(hello, "whole"), 7.0);
  EXPECT_EQ(Field<uint64_t>(hello, "huge"), UINT64_MAX);
}

// What an error repeats of the peer's text is cut to 80 characters: an
// unknown type of 1 MiB made an error frame over the limit, and the
// connection was never closed.
TEST(Frame, QuotedTextIsAbbreviated) {
  EXPECT_EQ(Abbreviated("status"), "status");
  const std::string cut = Abbreviated(std::string(1 << 20, 't'));
  EXPECT_EQ(cut, std::string(80, 't') + "... (1048576 bytes)");
}

TEST(Auth, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Auth, HkdfMatchesRfc5869) {
  // RFC 5869, test case 1: the first 32 of its 42 bytes.
  std::string salt;
  for (char byte = 0; byte <= 0x0c; ++byte) salt += byte;
  std::string info;
  for (int byte = 0xf0; byte <= 0xf9; ++byte) info += static_cast<char>(byte);
  const std::string key = HkdfSha256(std::string(22, '\x0b'), salt, info);
  std::string hex;
  for (const unsigned char byte : key)
    hex += "0123456789abcdef"[byte >> 4], hex += "0123456789abcdef"[byte & 15];
  EXPECT_EQ(hex, "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
}

TEST(Auth, SessionKeysDifferByDirectionNonceAndSecret) {
  const SessionKeys keys = DeriveSessionKeys("s", "n1", "n2");
  EXPECT_EQ(keys.to_coordinator.size(), 32u);
  EXPECT_NE(keys.to_coordinator, keys.to_peer);
  EXPECT_EQ(DeriveSessionKeys("s", "n1", "n2").to_peer, keys.to_peer);
  EXPECT_NE(DeriveSessionKeys("t", "n1", "n2").to_peer, keys.to_peer);
  EXPECT_NE(DeriveSessionKeys("s", "n3", "n2").to_peer, keys.to_peer);
  EXPECT_NE(DeriveSessionKeys("s", "n1", "n3").to_peer, keys.to_peer);
  EXPECT_NE(RandomNonce(), RandomNonce());
  EXPECT_EQ(RandomNonce().size(), 64u);
}

// One side's sealer and the other's opener, as a connection has them.
struct MacPair {
  SessionKeys keys = DeriveSessionKeys("secret", "n1", "n2");
  FrameMac peer{keys.to_coordinator, keys.to_peer};
  FrameMac coordinator{keys.to_peer, keys.to_coordinator};
};

TEST(FrameMac, SealedFramesOpenInOrder) {
  MacPair macs;
  const std::string first = macs.peer.Seal(R"({"type":"a"})");
  const std::string second = macs.peer.Seal(R"({"type":"b"})");
  EXPECT_EQ(first.size(), 12 + kSealOverhead);
  EXPECT_TRUE(IsSealed(first));
  EXPECT_FALSE(IsSealed(R"({"type":"a"})"));
  EXPECT_EQ(UnverifiedMessage(second), R"({"type":"b"})");
  EXPECT_EQ(macs.coordinator.Open(first), R"({"type":"a"})");
  EXPECT_EQ(macs.coordinator.Open(second), R"({"type":"b"})");
  EXPECT_EQ(macs.peer.Open(macs.coordinator.Seal(R"({"type":"c"})")), R"({"type":"c"})");
}

TEST(FrameMac, AnyFlippedByteIsAWrongMac) {
  MacPair macs;
  const std::string body = macs.peer.Seal(R"({"type":"result","ok":true})");
  for (size_t i = 0; i < body.size(); ++i) {
    MacPair fresh;
    std::string flipped = fresh.peer.Seal(R"({"type":"result","ok":true})");
    flipped[i] = static_cast<char>(flipped[i] ^ 0x01);
    const std::string error = ErrorOf([&] { fresh.coordinator.Open(flipped); });
    EXPECT_THAT(error, HasSubstr("wrong MAC")) << "byte " << i;
  }
}

TEST(FrameMac, ReplayedReorderedReflectedAndPlainFramesAreRefused) {
  MacPair macs;
  macs.peer.Seal(R"({"type":"a"})");  // lost on the way
  const std::string second = macs.peer.Seal(R"({"type":"b"})");
  EXPECT_THAT(ErrorOf([&] { macs.coordinator.Open(second); }),
              HasSubstr("frame number 1 where 0 was due (replayed or reordered)"));
  MacPair replay;
  const std::string once = replay.peer.Seal(R"({"type":"a"})");
  replay.coordinator.Open(once);
  EXPECT_THAT(ErrorOf([&] { replay.coordinator.Open(once); }),
              HasSubstr("frame number 0 where 1 was due"));
  // A frame sent back to its sender, or from another connection's keys.
  MacPair reflect;
  EXPECT_THAT(ErrorOf([&] { reflect.peer.Open(reflect.peer.Seal(R"({"type":"a"})")); }),
              HasSubstr("wrong MAC"));
  FrameMac other(DeriveSessionKeys("secret", "n1", "n9").to_coordinator, "k");
  MacPair fresh;
  EXPECT_THAT(ErrorOf([&] { fresh.coordinator.Open(other.Seal(R"({"type":"a"})")); }),
              HasSubstr("wrong MAC"));
  EXPECT_THAT(ErrorOf([&] { fresh.coordinator.Open(R"({"type":"forged"})"); }),
              HasSubstr("an unauthenticated frame after the handshake"));
  EXPECT_THAT(ErrorOf([&] { fresh.coordinator.Open(std::string(10, '\0')); }),
              HasSubstr("a sealed frame of 10 bytes"));
  EXPECT_THAT(ErrorOf([&] { fresh.peer.Seal(std::string(kMaxFrameBytes, 'x')); }),
              HasSubstr("over the frame limit once sealed"));
}

TEST(Auth, SecretFilesMustBePrivateAndNonEmpty) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("nimble_secret_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir / "secret";
  std::ofstream(path) << "hunter2\n";
  chmod(path.c_str(), 0600);
  EXPECT_EQ(ReadSecretFile(path), "hunter2");
  chmod(path.c_str(), 0644);
  EXPECT_THAT(ErrorOf([&] { ReadSecretFile(path); }), HasSubstr("readable by others"));
  std::ofstream(path, std::ios::trunc) << "\n";
  chmod(path.c_str(), 0600);
  EXPECT_THAT(ErrorOf([&] { ReadSecretFile(path); }), HasSubstr("empty"));
  EXPECT_THAT(ErrorOf([&] { ReadSecretFile((dir / "missing").string()); }),
              HasSubstr("cannot read"));
  std::filesystem::remove_all(dir);
}

TEST(HostPort, ParsesAndRejects) {
  const HostPort address = ParseHostPort("10.0.0.1:7450");
  EXPECT_EQ(address.host, "10.0.0.1");
  EXPECT_EQ(address.port, 7450);
  EXPECT_THAT(ErrorOf([] { ParseHostPort("nohost"); }), HasSubstr("is not HOST:PORT"));
  EXPECT_THAT(ErrorOf([] { ParseHostPort("h:99999"); }), HasSubstr("0..65535"));
  EXPECT_THAT(ErrorOf([] { ParseHostPort("h:12x"); }), HasSubstr("0..65535"));
}

TEST(Messages, JobSpecsRoundTripAndAreChecked) {
  JobSpec spec;
  spec.kind = "run";
  spec.target = "arm";
  spec.options = {{"args", {"--model", "lstm"}}};
  spec.allow_emulated = true;
  spec.cpu_flags = {"neon"};
  spec.min_cores = 4;
  const JobSpec back = JobSpecFromJson(ToJson(spec));
  EXPECT_EQ(ToJson(back), ToJson(spec));
  EXPECT_THAT(ErrorOf([] {
                JobSpecFromJson({{"kind", "run"}, {"target", "mips"}});
              }),
              HasSubstr("unknown target 'mips'"));
  EXPECT_THAT(ErrorOf([] { JobSpecFromJson({{"target", "arm"}}); }), HasSubstr("without 'kind'"));
  EXPECT_THAT(ErrorOf([] {
                JobSpecFromJson({{"kind", "run"}, {"min_cores", "many"}});
              }),
              HasSubstr("'min_cores' has the wrong type"));
}

struct HandshakeOutcome {
  std::string error;       // the peer's; empty: welcomed
  bool temporary = false;  // Refused::temporary()
  std::string refusal;     // the coordinator's (CoordinatorHandshake)
  Json after;              // what the coordinator read after the welcome
};

// The peer's handshake (secret "secret") against `coordinator`, the
// coordinator's side, on a loopback pair.
HandshakeOutcome Handshake(
    const std::function<asio::awaitable<void>(Connection&, HandshakeOutcome&)>& coordinator) {
  SocketPair pair;
  auto peer = std::make_shared<Connection>(std::move(pair.client), std::chrono::seconds(5));
  auto server = std::make_shared<Connection>(std::move(pair.server), std::chrono::seconds(5));
  peer->Start();
  server->Start();
  HandshakeOutcome outcome;
  asio::co_spawn(pair.io, coordinator(*server, outcome), asio::detached);
  try {
    pair.Await(PeerHandshake(*peer, "secret", "client", "me", Json::object()));
    peer->Send({{"type", "status"}});
    pair.Await(peer->Drain());
  } catch (const Refused& refused) {
    outcome.error = refused.what();
    outcome.temporary = refused.temporary();
  } catch (const std::exception& thrown) {
    outcome.error = thrown.what();
  }
  for (int i = 0; i < 100; ++i) pair.io.poll();
  peer->Close();
  server->Close();
  pair.io.poll();
  return outcome;
}

// The real coordinator side with `secret`, refusing with `refusal`.
std::function<asio::awaitable<void>(Connection&, HandshakeOutcome&)> RealCoordinator(
    std::string secret, std::string refusal = "") {
  return [secret, refusal](Connection& server, HandshakeOutcome& outcome) -> asio::awaitable<void> {
    // Built before the co_await (GCC 12 miscompiles braced JSON in one).
    const Json welcome = {{"heartbeat_s", 1}};
    const Admission admission = co_await CoordinatorHandshake(
        server, secret, std::chrono::seconds(5),
        [&](const Json& hello) {
          EXPECT_EQ(hello["role"], "client");
          EXPECT_EQ(hello["name"], "me");
          return refusal;
        },
        welcome);
    outcome.refusal = admission.refusal;
    if (admission.refusal.empty()) outcome.after = co_await server.Read(std::chrono::seconds(5));
  };
}

TEST(Handshake, BothSidesHoldingTheSecretTalkSealed) {
  const HandshakeOutcome outcome = Handshake(RealCoordinator("secret"));
  EXPECT_EQ(outcome.error, "");
  EXPECT_EQ(outcome.refusal, "");
  EXPECT_EQ(outcome.after["type"], "status");
}

TEST(Handshake, AWrongSecretIsRefusedFinally) {
  const HandshakeOutcome outcome = Handshake(RealCoordinator("other"));
  EXPECT_THAT(outcome.refusal, HasSubstr("wrong proof of the shared secret"));
  EXPECT_THAT(outcome.error, HasSubstr("refused: wrong proof of the shared secret"));
  EXPECT_FALSE(outcome.temporary);
}

TEST(Handshake, TheCoordinatorsReasonToRefuseReachesThePeer) {
  const HandshakeOutcome outcome = Handshake(RealCoordinator("secret", "agent of commit x"));
  EXPECT_THAT(outcome.error, HasSubstr("the coordinator refused: agent of commit x"));
}

// A coordinator without the secret that welcomes anyway, sealed under keys
// of its own or in the clear: the peer refuses it.
TEST(Handshake, AcceptsOnlyACoordinatorThatProvesTheSecret) {
  const auto impostor = [](bool sealed) {
    return [sealed](Connection& server, HandshakeOutcome&) -> asio::awaitable<void> {
      const std::string nonce = RandomNonce();
      server.Send({{"type", "challenge"}, {"protocol", kProtocolVersion}, {"nonce", nonce}});
      const Json hello =
          ParseMessage(UnverifiedMessage(co_await server.ReadBody(std::chrono::seconds(5))));
      if (sealed) {
        const SessionKeys keys = DeriveSessionKeys("guess", nonce, hello["nonce"]);
        server.Authenticate(std::make_unique<FrameMac>(keys.to_peer, keys.to_coordinator));
      }
      server.Send({{"type", "welcome"}});
    };
  };
  EXPECT_THAT(Handshake(impostor(true)).error, HasSubstr("did not prove it holds the secret"));
  EXPECT_THAT(Handshake(impostor(false)).error,
              HasSubstr("an unauthenticated 'welcome' from the coordinator"));
}

// A peer of protocol 1 (an unsealed hello with a proof) is told both versions.
TEST(Handshake, APeerOfTheOldProtocolIsToldBothVersions) {
  SocketPair pair;
  auto server = std::make_shared<Connection>(std::move(pair.server), std::chrono::seconds(5));
  server->Start();
  asio::write(pair.client, asio::buffer(EncodeFrame({{"type", "hello"},
                                                     {"protocol", 1},
                                                     {"role", "agent"},
                                                     {"name", "old"},
                                                     {"nonce", "n"},
                                                     {"proof", "p"}})));
  const Admission admission = pair.Await(CoordinatorHandshake(
      *server, "secret", std::chrono::seconds(5), [](const Json&) { return std::string(); },
      Json::object()));
  EXPECT_EQ(admission.refusal, "protocol 1 (this coordinator speaks 2)");
  server->Close();
  pair.io.poll();
}

// A coordinator at its connection limit says so in place of the challenge;
// the peer reports that, not a TLS mismatch.
TEST(Handshake, ARefusalInPlaceOfTheChallengeIsReported) {
  SocketPair pair;
  auto peer = std::make_shared<Connection>(std::move(pair.client), std::chrono::seconds(5));
  peer->Start();
  asio::write(pair.server,
              asio::buffer(EncodeFrame(
                  {{"type", "refused"}, {"reason", "3 connections open (the limit)"}})));
  // Temporary: it comes before anything is proved, so it cannot be about
  // this peer's secret or version (an agent retries it).
  try {
    pair.Await(PeerHandshake(*peer, "secret", "client", "me", Json::object()));
    ADD_FAILURE() << "the handshake succeeded";
  } catch (const Refused& refused) {
    EXPECT_THAT(refused.what(),
                HasSubstr("the coordinator refused: 3 connections open (the limit)"));
    EXPECT_TRUE(refused.temporary());
  }
  peer->Close();
  pair.io.poll();
}

}  // namespace
}  // namespace nimble::protocol

namespace nimble::protocol {
namespace {

// A self-signed certificate for 127.0.0.1 made with the openssl command.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nimble_tls_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string command =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " +
        (dir_ / "key.pem").string() + " -out " + (dir_ / "cert.pem").string() +
        " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -days 1 2>/dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs both handshakes over `pair`; the client's error, or "".
  std::string Handshake(SocketPair& pair, const std::string& server_name, Json* received) {
    auto server_tls = ServerTls(dir_ / "cert.pem", dir_ / "key.pem");
    auto client_tls = ClientTls(dir_ / "cert.pem");
    auto server = std::make_shared<Connection>(std::move(pair.server), std::chrono::seconds(5),
                                               server_tls.get());
    auto client = std::make_shared<Connection>(std::move(pair.client), std::chrono::seconds(5),
                                               client_tls.get());
    server->Start();
    client->Start();
    asio::co_spawn(
        pair.io,
        [&]() -> asio::awaitable<void> {
          try {
            co_await server->TlsHandshake(true, "", std::chrono::seconds(5));
            *received = co_await server->Read(std::chrono::seconds(5));
          } catch (const std::exception&) {
            server->Close();
          }
        },
        asio::detached);
    std::string error;
    try {
      pair.Await([&]() -> asio::awaitable<int> {
        co_await client->TlsHandshake(false, server_name, std::chrono::seconds(5));
        client->Send({{"type", "over-tls"}});
        co_await client->Drain();
        co_return 0;
      }());
      pair.Await([&]() -> asio::awaitable<int> {
        // Let the server read what was sent.
        asio::steady_timer timer(pair.io, std::chrono::milliseconds(100));
        co_await timer.async_wait(asio::use_awaitable);
        co_return 0;
      }());
    } catch (const std::exception& thrown) {
      error = thrown.what();
    }
    client->Close();
    server->Close();
    pair.io.restart();
    pair.io.poll();
    return error;
  }

  std::filesystem::path dir_;
};

TEST_F(TlsTest, MessagesCrossAVerifiedTlsConnection) {
  SocketPair pair;
  Json received;
  EXPECT_EQ(Handshake(pair, "127.0.0.1", &received), "");
  EXPECT_EQ(received["type"], "over-tls");
}

TEST_F(TlsTest, ACertificateForAnotherNameIsRefused) {
  SocketPair pair;
  Json received;
  EXPECT_THAT(Handshake(pair, "coordinator.example", &received),
              HasSubstr("certificate verify failed"));
  EXPECT_TRUE(received.is_null());
}

TEST_F(TlsTest, UnusableFilesAreNamed) {
  EXPECT_THAT(ErrorOf([&] { ServerTls(dir_ / "missing.pem", dir_ / "key.pem"); }),
              HasSubstr("missing.pem: cannot use the TLS certificate"));
  EXPECT_THAT(ErrorOf([&] { ServerTls(dir_ / "cert.pem", dir_ / "cert.pem"); }),
              HasSubstr("cannot use the TLS key"));
  EXPECT_THAT(ErrorOf([&] { ClientTls(dir_ / "missing.pem"); }),
              HasSubstr("cannot load the TLS CA"));
}

}  // namespace
}  // namespace nimble::protocol
