// What answers on the server's port while the model loads, so that a load
// balancer polling GET /health sees 503 {"status":"loading"} rather than a
// refused connection, and any other request gets a 503 error saying why.
// It holds the port until it hands the listening socket to the real server.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "core/error.h"
#include "server/http_limits.h"
#include "server/http_server.h"

namespace duet::server {

class StartupServer {
 public:
  explicit StartupServer(HttpLimits limits);
  ~StartupServer();

  // Binds host:port (0: any free port) and answers on a thread of its own;
  // returns the port.
  Result<int> start(const std::string& host, int port);
  // Closes the port and every connection; returns once the thread ended.
  void stop();
  // Stops answering and returns the listening socket, still listening, for
  // the real server to adopt: no client is refused in between.
  Listener hand_over();

 private:
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
};

}  // namespace duet::server
