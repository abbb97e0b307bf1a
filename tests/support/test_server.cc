#include "support/test_server.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "support/tls_stream.h"

namespace sluice::test {

test_server::test_server(std::string backend, dispatch_mode dispatch) {
    cfg_.backend = std::move(backend);
    cfg_.dispatch = dispatch;
    cfg_.listen = "127.0.0.1:0";
    cfg_.io_threads = 1;
    // Enough threads for the handful of concurrent connections a test opens; the defaults
    // (200 connection threads, 8 workers) cost seconds per server under TSan.
    cfg_.worker_threads = 4;
    cfg_.blocking.threads = 16;
    cfg_.blocking.accept_queue = 64;
    // Most tests stop the server with requests still suspended and expect them ended at once;
    // the drain itself (the default outside tests) has its own tests in drain_test.cc.
    cfg_.shutdown_timeout_ms = 0;
}

test_server::~test_server() {
    destroy();
}

test_server& test_server::route(std::string_view method, std::string_view pattern, handler h) {
    routes_.push_back({std::string(method), std::string(pattern), std::move(h)});
    return *this;
}

void test_server::start() {
    auto sink = [log = log_](log_level level, std::string_view text) { log->record(level, text); };
    server_ = std::make_unique<sluice::server>(cfg_, sluice::logger(cfg_.log, sink));
    for (auto& r : routes_) {
        server_->route(r.method, r.pattern, std::move(r.h));
    }
    routes_.clear();
    for (auto& fn : before_start_) {
        fn(*server_);
    }
    before_start_.clear();
    server_->start();
    if (!cfg_.tls.cert.empty()) {
        // With tls.listen, port() stays plaintext and only the second port speaks TLS.
        tls_port_ = cfg_.tls.listen.empty() ? server_->port() : server_->tls_port();
        register_tls_port(tls_port_, cfg_.tls.cert); // self-signed: the certificate is its own CA
    }
}

void test_server::forget_tls_port() noexcept {
    if (tls_port_ != 0) {
        unregister_tls_port(tls_port_);
        tls_port_ = 0;
    }
}

std::uint16_t test_server::port() const noexcept {
    return server_ ? server_->port() : 0;
}

server_stats test_server::stats() const noexcept {
    return server_ ? server_->stats() : server_stats{};
}

void test_server::stop() noexcept {
    if (!server_) {
        return;
    }
    // server::stop() joins the server's threads; a loop stuck in a server bug would hang the
    // whole suite here. Give it a generous deadline, then abort loudly instead of hanging.
    struct shared {
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
    };
    auto s = std::make_shared<shared>();
    std::thread stopper([srv = server_.get(), s] {
        srv->stop();
        std::lock_guard lock(s->mu);
        s->done = true;
        s->cv.notify_all();
    });
    std::unique_lock lock(s->mu);
    if (!s->cv.wait_for(lock, stop_deadline, [&] { return s->done; })) {
        std::fprintf(stderr,
                     "FATAL: sluice::server::stop() did not return within %lld ms: a server thread is "
                     "stuck (see the test that ran last). Aborting instead of hanging the suite.\n",
                     static_cast<long long>(stop_deadline.count()));
        std::fflush(stderr);
        std::abort();
    }
    lock.unlock();
    stopper.join();
}

void test_server::destroy() noexcept {
    if (server_) {
        server_->stop();
        server_.reset();
    }
    forget_tls_port();
}

bool test_server::wait_exchanges_freed(std::chrono::milliseconds timeout) const {
    return wait_until([&] { return stats().exchanges_live == 0; }, timeout);
}

bool test_server::wait_suspended(std::uint64_t n, std::chrono::milliseconds timeout) const {
    return wait_until([&] { return stats().exchanges_suspended == n; }, timeout);
}

} // namespace sluice::test
