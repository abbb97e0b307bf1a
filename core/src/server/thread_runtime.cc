// Thread-per-connection (Tomcat's BIO connector): an acceptor and a bounded pool.
//
// The acceptor's loop accepts into a bounded queue (blocking.accept_queue, Tomcat's
// acceptCount); when the queue is full it stops accepting and connections wait in the
// kernel's backlog. Each pool thread takes one connection and runs a loop over it with
// the blocking driver until it closes: the same loop, connection and exchange code as
// the reactors, with one connection per loop. While connections wait for a thread,
// responses close their connection (keep-alive off under pressure, as Tomcat BIO does),
// so that a few keep-alive clients cannot hold every thread forever.
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "loop/loop.h"
#include "server/connection.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/loop_thread.h"
#include "server/runtime.h"

namespace sluice::detail {

namespace {

class thread_runtime final : public runtime {
public:
    thread_runtime(const io::backend& b, server_context& ctx) : backend_(b), ctx_(ctx) {}

    ~thread_runtime() override {
        stop();
        join();
        std::lock_guard lock(mu_);
        for (int fd : queue_) {
            ::close(fd);
        }
    }

    void start(const socket_address& addr) override {
        const int fd = open_listener(addr, reuse_port::no, 4096);
        port_ = bound_port(fd);
        const std::uint32_t n = ctx_.cfg.blocking.threads;
        workers_.resize(n);
        std::vector<std::future<std::string>> ready;
        for (std::uint32_t i = 0; i < n; ++i) {
            std::promise<std::string> p;
            ready.push_back(p.get_future());
            workers_[i].thread = std::thread([this, i, p = std::move(p)]() mutable { run_worker(i, p); });
        }
        std::promise<std::string> p;
        ready.push_back(p.get_future());
        acceptor_thread_ = std::thread([this, fd, p = std::move(p)]() mutable { run_acceptor(fd, p); });
        std::string error;
        for (auto& f : ready) {
            std::string e = f.get();
            if (!e.empty() && error.empty()) {
                error = std::move(e);
            }
        }
        if (!error.empty()) {
            stop();
            join();
            throw startup_error("backend", error);
        }
    }

    void stop() noexcept override {
        std::lock_guard lock(mu_);
        if (stopped_) {
            return;
        }
        stopped_ = true;
        if (acceptor_ != nullptr) {
            acceptor_->stop();
        }
        for (auto& w : workers_) {
            if (w.loop != nullptr) {
                w.loop->stop();
            }
        }
        queue_cv_.notify_all();
        space_cv_.notify_all();
    }

    void join() override {
        if (acceptor_thread_.joinable()) {
            acceptor_thread_.join();
        }
        for (auto& w : workers_) {
            w.join();
        }
    }

    std::uint16_t port() const noexcept override { return port_; }

    server_stats stats() const noexcept override {
        server_stats st;
        std::lock_guard lock(mu_);
        add_stats(workers_, st);
        st.connections_open += queue_.size();
        return st;
    }

    std::vector<const loop*> watched_loops() const override { return {}; }

    bool owns_current_thread() const noexcept override {
        return acceptor_thread_.get_id() == std::this_thread::get_id() || runs_on_current_thread(workers_);
    }

private:
    void run_acceptor(int fd, std::promise<std::string>& ready) {
        std::string error;
        auto driver = backend_.create(driver_options_for(ctx_, 0), error);
        if (driver == nullptr) {
            ::close(fd);
            ready.set_value(error);
            return;
        }
        loop l(std::move(driver), ctx_.log, 0);
        listener lst(l, fd, [this](int conn_fd) { enqueue(conn_fd); });
        if (!lst.start()) {
            ready.set_value(std::string(backend_.name) + ": cannot accept on the listening socket");
            return;
        }
        l.on_stop([&lst] { lst.close(); });
        {
            std::lock_guard lock(mu_);
            acceptor_ = &l;
            if (stopped_) {
                l.stop();
            }
        }
        ready.set_value("");
        l.run();
        std::lock_guard lock(mu_);
        acceptor_ = nullptr;
    }

    // On the acceptor's thread: blocks while the queue is full (the acceptor stops accepting).
    void enqueue(int fd) {
        std::unique_lock lock(mu_);
        space_cv_.wait(lock,
                       [this] { return stopped_ || queue_.size() < ctx_.cfg.blocking.accept_queue + 1; });
        if (stopped_) {
            ::close(fd);
            return;
        }
        queue_.push_back(fd);
        update_pressure();
        queue_cv_.notify_one();
    }

    void update_pressure() { ctx_.keepalive_pressure.store(!queue_.empty(), std::memory_order_relaxed); }

    void run_worker(std::uint32_t i, std::promise<std::string>& ready) {
        if (std::string error = workers_[i].open(backend_, ctx_, i + 1, mu_); !error.empty()) {
            ready.set_value(error);
            return;
        }
        loop& l = *workers_[i].loop;
        loop_context& lc = *workers_[i].ctx;
        l.on_stop([&lc] { lc.begin_shutdown(); });
        {
            std::lock_guard lock(mu_);
            if (stopped_) {
                l.stop();
            }
        }
        ready.set_value("");
        for (;;) {
            int fd = -1;
            {
                std::unique_lock lock(mu_);
                queue_cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
                if (stopped_) {
                    break;
                }
                fd = queue_.front();
                queue_.pop_front();
                update_pressure();
            }
            space_cv_.notify_one();
            adopt_connection(lc, fd);
            l.run(loop::run_mode::until_idle);
        }
        // A stop that arrived while the loop was idle: let its tasks run and release.
        l.run(loop::run_mode::until_idle);
    }

    const io::backend& backend_;
    server_context& ctx_;
    mutable std::mutex mu_;
    std::condition_variable queue_cv_;
    std::condition_variable space_cv_;
    std::deque<int> queue_;
    std::vector<loop_thread> workers_;
    loop* acceptor_ = nullptr;
    std::thread acceptor_thread_;
    std::uint16_t port_ = 0;
    bool stopped_ = false;
};

} // namespace

std::unique_ptr<runtime> make_thread_runtime(const io::backend& b, server_context& ctx) {
    return std::make_unique<thread_runtime>(b, ctx);
}

} // namespace sluice::detail
