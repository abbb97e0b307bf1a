#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "loop/loop.h"
#include "server/connection.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/loop_thread.h"
#include "server/runtime.h"
#include "server/server_thread.h"

namespace sluice::detail {

io::driver_options driver_options_for(const server_context& ctx, unsigned loop_index) {
    io::driver_options o;
    o.loop_index = loop_index;
    o.send_timeout_ms = ctx.cfg.limits.write_timeout_ms;
    o.max_fds = ctx.cfg.limits.max_connections + 64;
    o.log = &ctx.log;
    return o;
}

namespace {

class reactor_runtime final : public runtime {
public:
    reactor_runtime(const io::backend& b, server_context& ctx) : backend_(b), ctx_(ctx) {}

    ~reactor_runtime() override {
        stop();
        join();
        for (int fd : pending_fds_) {
            ::close(fd);
        }
    }

    void start(const socket_address& addr) override {
        const unsigned n = ctx_.cfg.io_threads;
        // Every loop gets its own SO_REUSEPORT socket: the kernel spreads connections, and no
        // loop ever touches another's listener. Bound here, so that errors are startup errors.
        // SO_REUSEPORT would also let us join a port that another process (of the same user)
        // holds with SO_REUSEPORT: a plain bind first makes "address in use" an error instead.
        if (n > 1 && port_of(addr) != 0) {
            ::close(open_listener(addr, reuse_port::no, 1));
        }
        for (unsigned i = 0; i < n; ++i) {
            socket_address a = addr;
            if (i > 0) {
                set_port(a, port_);
            }
            pending_fds_.push_back(open_listener(a, n > 1 ? reuse_port::yes : reuse_port::no, 4096));
            if (i == 0) {
                port_ = bound_port(pending_fds_.back());
            }
        }
        slots_.resize(n);
        std::vector<std::future<std::string>> ready;
        for (unsigned i = 0; i < n; ++i) {
            std::promise<std::string> p;
            ready.push_back(p.get_future());
            const int fd = pending_fds_[i];
            slots_[i].thread = std::thread([this, i, fd, p = std::move(p)]() mutable { run_loop(i, fd, p); });
        }
        std::string error;
        for (auto& f : ready) {
            std::string e = f.get();
            if (!e.empty() && error.empty()) {
                error = std::move(e);
            }
        }
        pending_fds_.clear(); // owned by the listeners now (or closed by failed threads)
        if (!error.empty()) {
            stop();
            join();
            throw startup_error("backend", error);
        }
    }

    void stop() noexcept override {
        std::lock_guard lock(mu_);
        stopped_ = true;
        for (auto& s : slots_) {
            if (s.loop != nullptr) {
                s.loop->stop();
            }
        }
    }

    void join() override {
        for (auto& s : slots_) {
            s.join();
        }
    }

    std::uint16_t port() const noexcept override { return port_; }

    server_stats stats() const noexcept override {
        server_stats st;
        std::lock_guard lock(mu_);
        add_stats(slots_, st);
        return st;
    }

    void collect(request_totals& totals) const noexcept override {
        std::lock_guard lock(mu_);
        add_request_totals(slots_, totals);
    }

    std::vector<const loop*> watched_loops() const override {
        std::lock_guard lock(mu_);
        std::vector<const loop*> out;
        for (const auto& s : slots_) {
            if (s.loop != nullptr) {
                out.push_back(s.loop.get());
            }
        }
        return out;
    }

private:
    static std::uint16_t port_of(const socket_address& a) {
        if (a.storage.ss_family == AF_INET6) {
            return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
        }
        return ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
    }

    static void set_port(socket_address& a, std::uint16_t port) {
        if (a.storage.ss_family == AF_INET6) {
            reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_port = htons(port);
        } else {
            reinterpret_cast<sockaddr_in*>(&a.storage)->sin_port = htons(port);
        }
    }

    void run_loop(unsigned i, int fd, std::promise<std::string>& ready) {
        const server_thread_mark mark(&ctx_);
        if (std::string error = slots_[i].open(backend_, ctx_, i, mu_); !error.empty()) {
            ::close(fd);
            ready.set_value(error);
            return;
        }
        if (!serve(i, fd, ready)) {
            // Only now, with the listener (which holds a reference on the loop and cancels its
            // timer on the loop when destroyed) gone: free the loop.
            std::lock_guard lock(mu_);
            slots_[i].ctx.reset();
            slots_[i].loop.reset();
        }
    }

    // Runs loop i with a listener on fd until the loop ends; false if the listener could not
    // start (reported through ready). The listener lives exactly as long as this frame.
    bool serve(unsigned i, int fd, std::promise<std::string>& ready) {
        loop& l = *slots_[i].loop;
        loop_context& lc = *slots_[i].ctx;
        listener lst(l, fd, [&lc](int conn_fd) { adopt_connection(lc, conn_fd); });
        if (!lst.start()) {
            ready.set_value(std::string(backend_.name) + ": cannot accept on the listening socket");
            return false;
        }
        l.on_stop([&lst, &lc] {
            lst.close();
            lc.begin_shutdown();
        });
        {
            std::lock_guard lock(mu_);
            if (stopped_) {
                l.stop();
            }
        }
        ready.set_value("");
        l.run();
        // How evenly SO_REUSEPORT spread the connections (the kernel hashes the 4-tuple).
        ctx_.log.info("loop {}: {} connections accepted, {} requests", i,
                      lc.counters.accepted.load(std::memory_order_relaxed),
                      lc.counters.requests.load(std::memory_order_relaxed));
        return true;
    }

    const io::backend& backend_;
    server_context& ctx_;
    mutable std::mutex mu_;
    std::vector<loop_thread> slots_;
    std::vector<int> pending_fds_;
    std::uint16_t port_ = 0;
    bool stopped_ = false;
};

} // namespace

std::unique_ptr<runtime> make_reactor_runtime(const io::backend& b, server_context& ctx) {
    return std::make_unique<reactor_runtime>(b, ctx);
}

} // namespace sluice::detail
