#pragma once
// One accepted HTTP connection (request/reply loop, or a chunked watch stream) and the acceptor that
// starts them, shared by the test API server and the daemon's status server. Internal to
// src/cache/client/http: Asio/Beast never leave this folder.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "tessera/api/result.h"

namespace tessera::cache::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Request = bhttp::request<bhttp::string_body>;

class HttpConnection;
using Dispatch = std::function<void(const std::shared_ptr<HttpConnection>&, Request&&)>;

/// One accepted connection. All socket work runs on its strand.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(tcp::socket socket, Dispatch dispatch) : stream_(std::move(socket)), dispatch_(std::move(dispatch)) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  /// Sends a complete answer (on the strand), then reads the next request or closes.
  void reply(int code, const std::string& contentType, std::string body, bool keepAlive,
             std::vector<std::pair<std::string, std::string>> headers = {}) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(static_cast<bhttp::status>(code), 11);
    res->set(bhttp::field::server, "tessera-test-apiserver");
    res->set(bhttp::field::content_type, contentType);
    for (auto& [k, v] : headers) res->set(k, v);
    res->keep_alive(keepAlive);
    res->body() = std::move(body);
    res->prepare_payload();
    auto self = shared_from_this();
    net::dispatch(stream_.get_executor(), [self, res] {
      self->stream_.expires_after(std::chrono::seconds(30));
      bhttp::async_write(self->stream_, *res, [self, res](beast::error_code ec, size_t) {
        if (ec || !res->keep_alive()) return self->close();
        self->read();
      });
    });
  }

  // ---- streaming (watch) ----
  /// Starts a chunked 200 answer; push() adds chunks, end() finishes. Thread-safe.
  void beginStream() {
    std::lock_guard lock(mu_);
    streaming_ = true;
    out_ +=
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        "Cache-Control: no-cache, private\r\nConnection: close\r\n\r\n";
    schedule();
  }
  void push(const std::string& data) {
    if (data.empty()) return;
    std::lock_guard lock(mu_);
    if (ended_) return;
    char len[20];
    std::snprintf(len, sizeof len, "%zx\r\n", data.size());
    out_ += len;
    out_ += data;
    out_ += "\r\n";
    schedule();
  }
  /// graceful: the terminating chunk, then close; otherwise close at once (a dropped stream).
  void end(bool graceful) {
    std::lock_guard lock(mu_);
    if (ended_) return;
    ended_ = true;
    if (graceful) {
      out_ += "0\r\n\r\n";
      closeAfterFlush_ = true;
      schedule();
    } else {
      net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
    }
  }
  /// Called once when the stream is closed (either side), on the strand.
  void onClosed(std::function<void()> f) {
    std::lock_guard lock(mu_);
    closedHook_ = std::move(f);
  }
  bool closed() const { return closed_; }

  void close() {
    if (closed_.exchange(true)) return;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      hook = std::move(closedHook_);
      ended_ = true;
    }
    if (hook) hook();
  }

 private:
  void read() {
    if (closed_) return;
    req_ = {};
    stream_.expires_after(std::chrono::seconds(120));  // idle keep-alive connections go away
    auto self = shared_from_this();
    bhttp::async_read(stream_, buffer_, req_, [self](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->stream_.expires_never();
      self->dispatch_(self, std::move(self->req_));
    });
  }

  void schedule() {  // mu_ held
    if (writing_ || out_.empty()) return;
    writing_ = true;
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->flush(); });
  }

  void flush() {
    {
      std::lock_guard lock(mu_);
      if (out_.empty() || closed_) {
        writing_ = false;
        if (closeAfterFlush_ && out_.empty()) {
          net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
        }
        return;
      }
      sending_.swap(out_);
      out_.clear();
    }
    stream_.expires_after(std::chrono::seconds(60));
    auto self = shared_from_this();
    net::async_write(stream_.socket(), net::buffer(sending_), [self](beast::error_code ec, size_t) {
      self->stream_.expires_never();
      if (ec) {
        {
          std::lock_guard lock(self->mu_);
          self->writing_ = false;
        }
        return self->close();
      }
      self->sending_.clear();
      self->flush();
    });
  }

  beast::tcp_stream stream_;
  Dispatch dispatch_;
  beast::flat_buffer buffer_;
  Request req_;

  std::mutex mu_;
  std::string out_, sending_;
  bool streaming_ = false, writing_ = false, ended_ = false, closeAfterFlush_ = false;
  std::atomic<bool> closed_{false};
  std::function<void()> closedHook_;
};

/// Accepts sockets and starts an HttpConnection on each; owns the io_context threads.
class Listener {
 public:
  Listener(Dispatch dispatch, int threads) : dispatch_(std::move(dispatch)), threads_(std::max(1, threads)) {}
  ~Listener() { stop(); }

  api::Status start(const std::string& host, uint16_t port) {
    beast::error_code ec;
    auto addr = net::ip::make_address(host, ec);
    if (ec) return api::makeError("listen address \"" + host + "\": " + ec.message());
    tcp::endpoint ep(addr, port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return api::makeError("listening on " + host + ":" + std::to_string(port) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    accept();
    for (int i = 0; i < threads_; ++i) pool_.emplace_back([this] { ioc_.run(); });
    return api::Status::success();
  }

  void stop() {
    if (stopped_.exchange(true)) return;
    net::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    work_.reset();
    ioc_.stop();
    for (auto& t : pool_) t.join();
    pool_.clear();
  }

  uint16_t port() const { return port_; }
  net::io_context& ioc() { return ioc_; }

 private:
  void accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || stopped_) return;
      } else {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<HttpConnection>(std::move(socket), dispatch_)->start();
      }
      accept();
    });
  }

  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> work_{ioc_.get_executor()};
  tcp::acceptor acceptor_{net::make_strand(ioc_)};
  Dispatch dispatch_;
  int threads_;
  std::vector<std::thread> pool_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace tessera::cache::http
