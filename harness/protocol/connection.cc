#include "harness/protocol/connection.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace nimble::protocol {

namespace asio = boost::asio;

namespace {

std::string PeerOf(const Socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  if (error) return "unknown peer";
  return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
}

// Waits until `timer` is cancelled or closed down (the timers here never
// expire on their own: they are condition signals).
asio::awaitable<void> WaitSignal(asio::steady_timer& timer) {
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

using Stream = std::variant<Socket, asio::ssl::stream<Socket>>;

// The stream a connection starts with: the socket itself, or TLS over it
// (built in place: the TLS stream is never moved).
Stream NewStream(Socket socket, TlsContext* tls) {
  if (tls == nullptr) return Stream(std::in_place_index<0>, std::move(socket));
  return Stream(std::in_place_index<1>, std::move(socket), *tls);
}

}  // namespace

Connection::Connection(Socket socket, Duration write_timeout, TlsContext* tls)
    : stream_(NewStream(std::move(socket), tls)),
      peer_(PeerOf(this->socket())),
      write_timeout_(write_timeout),
      read_deadline_(this->socket()),
      write_deadline_(this->socket()),
      wake_writer_(this->socket().get_executor()),
      drained_(this->socket().get_executor()) {
  wake_writer_.expires_at(std::chrono::steady_clock::time_point::max());
  drained_.expires_at(std::chrono::steady_clock::time_point::max());
}

void Connection::Start() {
  auto self = shared_from_this();
  const auto executor = socket().get_executor();
  asio::co_spawn(
      executor, [self]() { return self->read_deadline_.Watch(); }, asio::detached);
  asio::co_spawn(
      executor, [self]() { return self->write_deadline_.Watch(); }, asio::detached);
  asio::co_spawn(
      executor, [self]() { return self->WriteLoop(); }, asio::detached);
}

Socket& Connection::socket() {
  return stream_.index() == 0 ? std::get<0>(stream_) : std::get<1>(stream_).next_layer();
}

const Socket& Connection::socket() const {
  return stream_.index() == 0 ? std::get<0>(stream_) : std::get<1>(stream_).next_layer();
}

asio::awaitable<void> Connection::TlsHandshake(bool as_server, const std::string& server_name,
                                               Duration timeout) {
  if (stream_.index() == 0) co_return;
  TlsStream& tls = std::get<1>(stream_);
  if (!as_server) {
    // The certificate must name the host the client meant to reach.
    tls.set_verify_callback(asio::ssl::host_name_verification(server_name));
    SSL_set_tlsext_host_name(tls.native_handle(), server_name.c_str());
  }
  read_deadline_.Arm(timeout);
  boost::system::error_code error;
  co_await tls.async_handshake(
      as_server ? asio::ssl::stream_base::server : asio::ssl::stream_base::client,
      asio::redirect_error(asio::use_awaitable, error));
  read_deadline_.Disarm();
  if (error) {
    Close();
    throw Error("TLS handshake with " + peer_ + " failed: " + error.message());
  }
}

void Connection::Authenticate(std::unique_ptr<FrameMac> mac) {
  mac_ = std::move(mac);
}

asio::awaitable<std::string> Connection::ReadBody(Duration timeout) {
  try {
    if (stream_.index() == 0) {
      co_return co_await ReadFrameBody(std::get<0>(stream_), read_deadline_, timeout);
    }
    co_return co_await ReadFrameBody(std::get<1>(stream_), read_deadline_, timeout);
  } catch (const boost::system::system_error&) {
    // The deadline closed the socket under the read: say so, rather than
    // "Operation canceled".
    if (!read_deadline_.expired()) throw;
  }
  throw boost::system::system_error(asio::error::timed_out,
                                    "no complete message within the read deadline");
}

Json Connection::Open(const std::string& body) {
  return ParseMessage(mac_ ? mac_->Open(body) : body);
}

asio::awaitable<Json> Connection::Read(Duration timeout) {
  co_return Open(co_await ReadBody(timeout));
}

void Connection::Send(const Json& message) {
  if (!open()) return;
  const std::string body = message.dump();
  outbox_.push_back(FrameOf(mac_ ? mac_->Seal(body) : body));
  wake_writer_.cancel();
}

asio::awaitable<void> Connection::Drain() {
  while (open() && (writing_ || !outbox_.empty())) co_await WaitSignal(drained_);
}

void Connection::Close() {
  boost::system::error_code ignored;
  socket().close(ignored);
  outbox_.clear();
  wake_writer_.cancel();
  drained_.cancel();
  read_deadline_.Disarm();
  write_deadline_.Disarm();
}

asio::awaitable<void> Connection::WriteLoop() {
  auto self = shared_from_this();  // alive while writing
  while (open()) {
    if (outbox_.empty()) {
      drained_.cancel();
      co_await WaitSignal(wake_writer_);
      continue;
    }
    const std::string frame = std::move(outbox_.front());
    outbox_.pop_front();
    writing_ = true;
    boost::system::error_code error;
    write_deadline_.Arm(write_timeout_);
    if (stream_.index() == 0) {
      co_await asio::async_write(std::get<0>(stream_), asio::buffer(frame),
                                 asio::redirect_error(asio::use_awaitable, error));
    } else {
      co_await asio::async_write(std::get<1>(stream_), asio::buffer(frame),
                                 asio::redirect_error(asio::use_awaitable, error));
    }
    write_deadline_.Disarm();
    writing_ = false;
    if (error) Close();
  }
  drained_.cancel();
}

}  // namespace nimble::protocol
