#include "runtime/tcp_listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/logging.h"

namespace magnetar::runtime {

using common::Result;
using common::Status;

TcpListener::TcpListener(Runtime& runtime, std::string name, HandlerFactory factory,
                         ConnectionOptions options)
    : runtime_(runtime),
      name_(std::move(name)),
      factory_(std::move(factory)),
      options_(options),
      acceptor_(runtime.reactor(0)),
      connections_(runtime.size()),
      max_per_address_(runtime.max_connections_per_address()) {}

TcpListener::~TcpListener() { shutdown(std::chrono::milliseconds(0)); }

Result<std::unique_ptr<TcpListener>> TcpListener::listen(Runtime& runtime, std::string name,
                                                         const std::string& host, uint16_t port,
                                                         HandlerFactory factory,
                                                         ConnectionOptions options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port_str = std::to_string(port);
  int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
  if (gai != 0) {
    return Status::invalid_argument(name + ": cannot resolve bind address '" + host + "': " + gai_strerror(gai));
  }
  int fd = -1;
  Status last = Status::io_error("no address");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = Status::from_errno(errno, name + ": socket");
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) break;
    last = Status::from_errno(errno, name + ": cannot listen on " + host + ":" + port_str);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return last;

  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  uint16_t actual = bound.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  std::unique_ptr<TcpListener> l(new TcpListener(runtime, std::move(name), std::move(factory), options));
  l->fd_ = fd;
  l->port_ = actual;
  TcpListener* self = l.get();
  int rc = l->acceptor_.run_sync([self]() {
    self->poll_ = new uv_poll_t;
    int r = uv_poll_init_socket(self->acceptor_.loop(), self->poll_, self->fd_);
    if (r != 0) {
      delete self->poll_;
      self->poll_ = nullptr;
      return r;
    }
    self->poll_->data = self;
    return uv_poll_start(self->poll_, UV_READABLE, [](uv_poll_t* p, int status, int) {
      if (status == 0) static_cast<TcpListener*>(p->data)->on_readable();
    });
  });
  if (rc != 0) {
    return Status::io_error(self->name_ + ": cannot watch listening socket: " + uv_strerror(rc));
  }
  return l;
}

namespace {

// The IP of a peer as accept4 gave it, without the port.
std::string peer_ip(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    uv_ip4_name(reinterpret_cast<const sockaddr_in*>(&addr), host, sizeof(host));
  } else if (addr.ss_family == AF_INET6) {
    uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(&addr), host, sizeof(host));
  }
  return host;
}

}  // namespace

void TcpListener::on_readable() {
  // Accept a bounded batch per wake-up so one busy listener cannot starve the loop.
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        MLOG_WARN("{}: accept failed: {}", name_, std::strerror(errno));
      }
      return;
    }
    std::string address;
    if (max_per_address_ > 0) {
      address = peer_ip(addr);
      if (!admit_address(address)) {
        // Logged once per 1000 refusals: a flood must not flood the log too.
        if (refused_.fetch_add(1, std::memory_order_relaxed) % 1000 == 0) {
          MLOG_WARN("{}: {} has {} connections, the most one address may have; closing new ones", name_, address,
                    max_per_address_);
        }
        ::close(fd);
        continue;
      }
    }
    Reactor& target = runtime_.next();
    if (&target == &acceptor_) {
      adopt_on(target, fd, std::move(address));
      continue;
    }
    Status st = target.post([this, &target, fd, address]() { adopt_on(target, fd, address); });
    if (!st.is_ok()) {
      MLOG_WARN("{}: dropping new connection: {}", name_, st.message());
      ::close(fd);
      if (!address.empty()) release_address(address);
    }
  }
}

bool TcpListener::admit_address(const std::string& address) {
  std::lock_guard lock(addresses_mu_);
  uint32_t& count = per_address_[address];
  if (count >= max_per_address_) return false;
  ++count;
  return true;
}

void TcpListener::release_address(const std::string& address) {
  std::lock_guard lock(addresses_mu_);
  auto it = per_address_.find(address);
  if (it == per_address_.end()) return;
  if (--it->second == 0) per_address_.erase(it);
}

void TcpListener::adopt_on(Reactor& reactor, int fd, std::string address) {
  if (shut_down_) {
    ::close(fd);
    if (!address.empty()) release_address(address);
    return;
  }
  Connection* c = Connection::adopt(reactor, fd, factory_(reactor), options_);
  if (c == nullptr) {
    if (!address.empty()) release_address(address);
    return;
  }
  auto& list = connections_[reactor.index()];
  list.push_back(c);
  live_.fetch_add(1);
  c->set_on_destroy([this, &list, address = std::move(address)](Connection* gone) {
    auto it = std::find(list.begin(), list.end(), gone);
    if (it != list.end()) {
      *it = list.back();
      list.pop_back();
    }
    if (!address.empty()) release_address(address);
    live_.fetch_sub(1);
  });
}

size_t TcpListener::connection_count() const { return live_.load(); }

void TcpListener::shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  if (poll_ != nullptr) {
    acceptor_.run_sync([this]() {
      shut_down_ = true;
      uv_poll_stop(poll_);
      uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
      poll_ = nullptr;
      ::close(fd_);
      fd_ = -1;
    });
  }
  shut_down_ = true;
  // Connections handed to other reactors before shut_down_ was set are already
  // in their lists once these run_sync calls return (posts are ordered).
  for (size_t i = 0; i < runtime_.size(); ++i) {
    runtime_.reactor(i).run_sync([this, i]() {
      for (Connection* c : std::vector<Connection*>(connections_[i])) c->close();
    });
  }
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (live_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < runtime_.size(); ++i) {
    runtime_.reactor(i).run_sync([this, i]() {
      for (Connection* c : std::vector<Connection*>(connections_[i])) {
        c->abort(Status::unavailable("server shutting down"));
      }
    });
  }
  // Aborted connections finish closing on their next loop iteration.
  auto hard_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (live_.load() > 0 && std::chrono::steady_clock::now() < hard_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (live_.load() > 0) MLOG_WARN("{}: {} connections did not close", name_, live_.load());
}

Status listen_plain_and_tls(Runtime& runtime, const std::string& name, const std::string& host,
                            const ListenerPorts& ports, const TcpListener::HandlerFactory& factory,
                            ConnectionOptions options, std::unique_ptr<TcpListener>* plain,
                            std::unique_ptr<TcpListener>* tls) {
  std::unique_ptr<TcpListener> p, t;
  if (ports.plain_enabled) {
    auto l = TcpListener::listen(runtime, name, host, ports.port, factory, options);
    if (!l) return l.status();
    p = std::move(l).value();
  }
  if (ports.tls) {
    options.tls = ports.tls;
    auto l = TcpListener::listen(runtime, name + "-tls", host, ports.tls_port, factory, options);
    if (!l) return l.status();
    t = std::move(l).value();
  }
  *plain = std::move(p);
  *tls = std::move(t);
  return Status::ok();
}

}  // namespace magnetar::runtime
