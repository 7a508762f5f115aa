#include "test_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace khorovod::rendezvous::testing {

ServerOptions DefaultOptions() {
  ServerOptions o;
  o.token = kToken;
  o.service.job = kJob;
  o.service.policy.min_workers = 1;
  o.service.policy.max_workers = 8;
  o.service.policy.settle = std::chrono::milliseconds(50);
  o.service.max_wait = std::chrono::milliseconds(5000);
  o.service.log = false;
  return o;
}

TestServer::TestServer(ServerOptions options) : options_(std::move(options)) { Start(); }

TestServer::~TestServer() { Stop(); }

void TestServer::Start() {
  server_ = std::make_unique<RendezvousServer>(options_);
  Status s = server_->Start();
  if (!s.ok()) ADD_FAILURE() << "cannot start the rendezvous server: " << s.message();
}

void TestServer::Stop() {
  if (server_) server_->Stop();
}

void TestServer::Restart() {
  int old_port = port();
  server_->Stop();
  server_.reset();
  options_.port = old_port;
  Start();
}

HttpEndpoint TestServer::endpoint(const std::string& token) const {
  return HttpEndpoint{"127.0.0.1", port(), token};
}

RawReply Send(int port, const std::string& method, const std::string& path, const std::string& body,
              const std::optional<std::string>& token) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(std::chrono::seconds(5));
  cli.set_read_timeout(std::chrono::seconds(30));
  cli.set_keep_alive(false);
  cli.set_decompress(false);
  cli.set_url_encode(false);
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.body = body;
  if (!body.empty()) req.set_header("Content-Type", "application/json");
  if (token) req.set_header("Authorization", "Bearer " + *token);
  httplib::Result res = cli.send(req);
  RawReply out;
  if (!res) return out;
  out.transport_ok = true;
  out.status = res->status;
  out.text = res->body;
  out.body = nlohmann::json::parse(res->body, nullptr, false);
  out.content_type = res->get_header_value("Content-Type");
  out.retry_after = res->get_header_value("Retry-After");
  return out;
}

std::string SendRawBytes(int port, const std::string& bytes, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace khorovod::rendezvous::testing
