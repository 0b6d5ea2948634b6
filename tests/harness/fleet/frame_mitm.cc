// A man in the middle for the fleet suite: a real process on the path
// between agents and the coordinator that forwards every frame and, on the
// first `--times` chances, attacks the agent's stream:
//   flip    flips one digit of a `result` message (the JSON stays valid);
//   replay  forwards a `result` frame twice;
//   forge   injects a failed `result` of its own for the job it saw leased,
//           numbered as the agent's next frame, with a MAC of zeros.
// Sealed frames are readable (the MAC gives integrity, not secrecy), so it
// sees the types. It prints one line per attack to stdout, so a test that
// expects a closed connection can check the attack did happen.
//   frame_mitm --listen HOST:PORT --to HOST:PORT --attack flip|replay|forge [--times N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

namespace {

using Json = nlohmann::json;

constexpr size_t kSequenceBytes = 8;
constexpr size_t kMacBytes = 32;

struct Options {
  std::string listen_host, to_host;
  uint16_t listen_port = 0, to_port = 0;
  std::string attack;
  int times = 1;
};

std::atomic<int> attacks_left;
std::mutex output;

void Say(const std::string& line) {
  std::lock_guard lock(output);
  std::cout << line << std::endl;
}

sockaddr_in Address(const std::string& host, uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    std::cerr << "frame_mitm: '" << host << "' is not an IPv4 address\n";
    std::exit(2);
  }
  return address;
}

bool ReadAll(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t got = read(fd, data, size);
    if (got <= 0) return false;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t wrote = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (wrote <= 0) return false;
    sent += static_cast<size_t>(wrote);
  }
  return true;
}

std::optional<std::string> ReadFrameBody(int fd) {
  unsigned char header[4];
  if (!ReadAll(fd, reinterpret_cast<char*>(header), 4)) return std::nullopt;
  const uint32_t length = uint32_t{header[0]} << 24 | uint32_t{header[1]} << 16 |
                          uint32_t{header[2]} << 8 | uint32_t{header[3]};
  if (length == 0 || length > (1u << 20)) return std::nullopt;
  std::string body(length, '\0');
  if (!ReadAll(fd, body.data(), length)) return std::nullopt;
  return body;
}

std::string Frame(const std::string& body) {
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>(body.size() >> (24 - 8 * i) & 0xff);
  return frame + body;
}

bool Sealed(const std::string& body) {
  return body.size() > kSequenceBytes + kMacBytes && body[0] != '{';
}

// The message of a frame, sealed or not; null when it is not JSON.
Json MessageOf(const std::string& body) {
  const std::string text =
      Sealed(body) ? body.substr(kSequenceBytes, body.size() - kSequenceBytes - kMacBytes) : body;
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

bool TakeAttack() {
  int left = attacks_left.load();
  while (left > 0) {
    if (attacks_left.compare_exchange_weak(left, left - 1)) return true;
  }
  return false;
}

// One agent connection: both directions forwarded frame by frame.
struct Link {
  int agent = -1;
  int coordinator = -1;
  std::mutex to_coordinator;  // the forger writes into the agent's stream too
  uint64_t agent_frames = 0;  // frames the agent sent: the next one's number
  std::optional<std::pair<int64_t, int64_t>> leased;  // (job, attempt) seen going to the agent
  std::string peer;
};

std::string Sequence(uint64_t number) {
  std::string bytes(kSequenceBytes, '\0');
  for (size_t i = 0; i < kSequenceBytes; ++i) {
    bytes[i] = static_cast<char>(number >> (8 * (kSequenceBytes - 1 - i)) & 0xff);
  }
  return bytes;
}

void ForwardToAgent(Link& link, const Options& options) {
  while (std::optional<std::string> body = ReadFrameBody(link.coordinator)) {
    const Json message = MessageOf(*body);
    if (options.attack == "forge" && message.is_object() && message.value("type", "") == "job" &&
        TakeAttack()) {
      const int64_t job = message.value("job_id", int64_t{0});
      const int64_t attempt = message.value("attempt", int64_t{0});
      const Json forged = {{"type", "result"},
                           {"job_id", job},
                           {"attempt", attempt},
                           {"ok", false},
                           {"reason", "forged by the man in the middle"}};
      std::lock_guard lock(link.to_coordinator);
      const std::string sealed =
          Sequence(link.agent_frames++) + forged.dump() + std::string(kMacBytes, '\0');
      WriteAll(link.coordinator, Frame(sealed));
      Say("forged a result for job " + std::to_string(job) + " attempt " + std::to_string(attempt) +
          " from " + link.peer);
    }
    if (!WriteAll(link.agent, Frame(*body))) break;
  }
  shutdown(link.agent, SHUT_RDWR);
  shutdown(link.coordinator, SHUT_RDWR);
}

void ForwardToCoordinator(Link& link, const Options& options) {
  while (std::optional<std::string> body = ReadFrameBody(link.agent)) {
    const Json message = MessageOf(*body);
    const bool result = message.is_object() && message.value("type", "") == "result";
    std::string frame = Frame(*body);
    int copies = 1;
    if (result && options.attack == "flip" && TakeAttack()) {
      // The last digit of the message: a figure or an id, still valid JSON.
      const size_t end = Sealed(*body) ? body->size() - kMacBytes : body->size();
      for (size_t i = end; i-- > (Sealed(*body) ? kSequenceBytes : 0);) {
        if ((*body)[i] >= '0' && (*body)[i] <= '9') {
          frame[4 + i] = static_cast<char>((*body)[i] ^ 1);
          Say("flipped byte " + std::to_string(i) + " of a result frame from " + link.peer);
          break;
        }
      }
    } else if (result && options.attack == "replay" && TakeAttack()) {
      copies = 2;
      Say("replayed a result frame from " + link.peer);
    }
    std::lock_guard lock(link.to_coordinator);
    // The forger numbers its frame after the agent's: only the agent's own
    // frames count here, once each, a replay included.
    ++link.agent_frames;
    bool sent = true;
    for (int i = 0; i < copies && sent; ++i) sent = WriteAll(link.coordinator, frame);
    if (!sent) break;
  }
  shutdown(link.agent, SHUT_RDWR);
  shutdown(link.coordinator, SHUT_RDWR);
}

void Serve(int agent, std::string peer, const Options& options) {
  Link link;
  link.agent = agent;
  link.peer = std::move(peer);
  link.coordinator = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in to = Address(options.to_host, options.to_port);
  if (connect(link.coordinator, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
    Say("cannot reach the coordinator: " + std::string(std::strerror(errno)));
    close(agent);
    close(link.coordinator);
    return;
  }
  std::thread down([&] { ForwardToAgent(link, options); });
  ForwardToCoordinator(link, options);
  down.join();
  close(link.agent);
  close(link.coordinator);
}

bool ParseHostPort(const std::string& text, std::string& host, uint16_t& port) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  host = text.substr(0, colon);
  port = static_cast<uint16_t>(std::stoi(text.substr(colon + 1)));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--listen") {
      ok = ParseHostPort(value, options.listen_host, options.listen_port);
    } else if (flag == "--to") {
      ok = ParseHostPort(value, options.to_host, options.to_port);
    } else if (flag == "--attack") {
      options.attack = value;
    } else if (flag == "--times") {
      options.times = std::stoi(value);
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "frame_mitm: bad option " << flag << " " << value << "\n";
      return 2;
    }
  }
  if (options.attack != "flip" && options.attack != "replay" && options.attack != "forge") {
    std::cerr << "frame_mitm: --attack flip|replay|forge\n";
    return 2;
  }
  attacks_left = options.times;
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int yes = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const sockaddr_in address = Address(options.listen_host, options.listen_port);
  if (bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 16) != 0) {
    std::cerr << "frame_mitm: cannot listen: " << std::strerror(errno) << "\n";
    return 1;
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length);
  Say("listening on " + options.listen_host + ":" + std::to_string(ntohs(bound.sin_port)));
  while (true) {
    sockaddr_in from{};
    socklen_t from_length = sizeof(from);
    const int agent =
        accept4(listener, reinterpret_cast<sockaddr*>(&from), &from_length, SOCK_CLOEXEC);
    if (agent < 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &from.sin_addr, text, sizeof(text));
    std::thread(Serve, agent, std::string(text) + ":" + std::to_string(ntohs(from.sin_port)),
                std::cref(options))
        .detach();
  }
}
