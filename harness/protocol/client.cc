#include "harness/protocol/client.h"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

#include "nimble/vm/error.h"

namespace nimble::protocol {

namespace asio = boost::asio;

constexpr auto kReplyTimeout = std::chrono::seconds(60);

template <typename T>
T Client::Await(asio::awaitable<T> operation) {
  std::future<T> result = asio::co_spawn(io_, std::move(operation), asio::use_future);
  io_.restart();
  while (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io_.run_one();
  try {
    return result.get();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    throw Error("coordinator " + address_ + ": " + error.what());
  }
}

Client::Client(const std::string& address, const std::string& secret,
               std::shared_ptr<TlsContext> tls)
    : address_(address), tls_(std::move(tls)) {
  const HostPort host_port = ParseHostPort(address);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string name = std::string(host) + ":" + std::to_string(getpid());
  Await([&]() -> asio::awaitable<Json> {
    Socket socket = co_await ConnectTo(host_port, std::chrono::seconds(10));
    connection_ = std::make_shared<Connection>(std::move(socket), kReplyTimeout, tls_.get());
    connection_->Start();
    co_await connection_->TlsHandshake(/*as_server=*/false, host_port.host, kReplyTimeout);
    co_return co_await PeerHandshake(*connection_, secret, "client", name, Json::object());
  }());
}

Client::~Client() {
  if (connection_) connection_->Close();
  io_.restart();
  io_.poll();
}

Json Client::Request(const Json& request) {
  connection_->Send(request);
  const Json reply = Await(connection_->Read(kReplyTimeout));
  if (MessageType(reply) == "error") {
    throw Error("coordinator " + address_ + ": " + Field<std::string>(reply, "reason"));
  }
  return reply;
}

}  // namespace nimble::protocol
