// Thread-per-connection (Tomcat's BIO connector): an acceptor and a bounded pool.
//
// The acceptor's loop accepts into a queue; each pool thread takes one connection and runs
// a loop over it with the blocking driver until it closes: the same loop, connection and
// exchange code as the reactors, with one connection per loop. Between connections a thread
// waits in its loop (run_once), woken for a queued connection, so that tasks and timers
// handed to the loop after its connection closed still run.
//
// Admission (blocking.accept_queue, Tomcat's acceptCount): a connection that an idle thread
// will take does not count as waiting; at most accept_queue more wait for a thread. When
// that many wait, the acceptor stops accepting and connections stay in the kernel's
// backlog. With accept_queue = 0 nothing waits: a connection accepted while every thread is
// taken is closed at once (load shedding: the client learns now, not after a timeout).
//
// Keep-alive pressure: while more than 3/4 of the threads hold or are about to hold a
// connection, responses close their connection, so that a few keep-alive clients cannot
// hold every thread (Tomcat BIO's disableKeepAlivePercentage, 75 by default). A connection
// momentarily queued while threads are idle is not pressure: closing then only dropped
// requests that clients had already pipelined (issue 6: h2load -c 100 -m 10 on 200 threads
// lost 6,813 of 200,000).
#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "loop/loop.h"
#include "server/connection.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/loop_thread.h"
#include "server/runtime.h"
#include "server/server_thread.h"
#include "server/thread_start.h"

namespace sluice::detail {

namespace {

using queued = listening_socket; // an accepted connection, and what the listener that took it speaks

class thread_runtime final : public runtime {
public:
    thread_runtime(const io::backend& b, server_context& ctx) : backend_(b), ctx_(ctx) {}

    ~thread_runtime() override {
        stop();
        join();
        std::lock_guard lock(mu_);
        for (const queued& q : queue_) {
            ::close(q.fd);
        }
    }

    void start(listen_plan plan) override {
        // One acceptor loop accepts on every socket of every endpoint: inherited ones (each with
        // a kernel queue of its own that must be emptied), or the one bound here.
        std::vector<listening_socket> fds;
        try {
            for (std::size_t e = 0; e < plan.size() && e < max_listen_endpoints; ++e) {
                const std::size_t first = fds.size();
                std::vector<int> adopted = std::exchange(plan[e].adopted, {});
                for (int fd : adopted) {
                    fds.push_back({fd, plan[e].kind, plan[e].role});
                }
                if (adopted.empty()) {
                    fds.push_back({open_endpoint_listener(plan[e], plan[e].addr, reuse_port::no, 4096),
                                   plan[e].kind, plan[e].role});
                } else {
                    ctx_.log.info("adopted {} inherited listening socket{} on port {} ({})", adopted.size(),
                                  adopted.size() == 1 ? "" : "s", bound_port(adopted.front()), plan[e].key);
                }
                ports_[e] = bound_port(fds[first].fd);
            }
        } catch (...) {
            for (const listening_socket& s : fds) {
                ::close(s.fd);
            }
            close_adopted(plan);
            throw;
        }
        {
            std::lock_guard lock(mu_);
            listening_ = fds;
        }
        const std::uint32_t n = ctx_.cfg.blocking.threads;
        workers_.resize(n);
        {
            std::lock_guard lock(mu_);
            parking_.resize(n);
            parked_.reserve(n);
        }
        std::vector<std::future<std::string>> ready;
        ready.reserve(std::size_t{n} + 1);
        try {
            for (std::uint32_t i = 0; i < n; ++i) {
                std::promise<std::string> p;
                std::future<std::string> f = p.get_future();
                workers_[i].thread =
                    start_thread(&ctx_, [this, i, p = std::move(p)]() mutable { run_worker(i, p); });
                ready.push_back(std::move(f));
            }
            std::promise<std::string> p;
            std::future<std::string> f = p.get_future();
            // Copied in, not moved: if the acceptor cannot start, the sockets are closed below.
            acceptor_thread_ =
                start_thread(&ctx_, [this, fds, p = std::move(p)]() mutable { run_acceptor(fds, p); });
            ready.push_back(std::move(f));
        } catch (const std::exception& e) {
            // The connection threads that started are stopped and joined once each has opened
            // its loop or failed; nobody accepts on the listening sockets.
            const std::size_t started = ready.size();
            for (auto& f : ready) {
                f.wait();
            }
            for (const listening_socket& s : fds) {
                ::close(s.fd);
            }
            stop();
            join();
            throw thread_start_failed("blocking.threads", started, std::size_t{n} + 1, e);
        }
        std::string error;
        std::size_t failed = ready.size();
        for (std::size_t k = 0; k < ready.size(); ++k) {
            std::string e = ready[k].get();
            if (!e.empty() && error.empty()) {
                error = std::move(e);
                failed = k;
            }
        }
        if (!error.empty()) {
            stop();
            join();
            if (failed < n) {
                // Each connection thread opens a loop of its own, with descriptors of its own:
                // the setting to change is the thread count (or the open-file limit).
                throw startup_error("blocking.threads", "connection thread " + std::to_string(failed + 1) +
                                                            " of " + std::to_string(n) +
                                                            " cannot open its loop: " + error);
            }
            throw startup_error("backend", error);
        }
    }

    void stop() noexcept override {
        std::lock_guard lock(mu_);
        if (stopped_) {
            return;
        }
        stopped_ = true;
        listening_.clear(); // the listeners close now
        // After a hand-over the connections already accepted, queued or not, are served: the
        // threads stop once the acceptor has ended and the queue is empty. Otherwise at once,
        // and what is queued is closed.
        graceful_ = ctx_.drain_idle_after_response.load(std::memory_order_relaxed);
        if (acceptor_ != nullptr) {
            acceptor_->stop();
        }
        if (!graceful_ || (acceptor_done_ && queue_.empty())) {
            stop_workers();
        }
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

    std::uint16_t port(std::size_t endpoint) const noexcept override {
        return endpoint < ports_.size() ? ports_[endpoint] : 0;
    }

    server_stats stats() const noexcept override {
        server_stats st;
        std::lock_guard lock(mu_);
        add_stats(workers_, st);
        st.connections_open += queue_.size();
        st.connections_refused += refused_total_.load(std::memory_order_relaxed);
        return st;
    }

    void collect(request_totals& totals) const noexcept override {
        std::lock_guard lock(mu_);
        add_request_totals(workers_, totals);
    }

    std::vector<const loop*> watched_loops() const override { return {}; }

    std::vector<listening_socket> listening_sockets() const override {
        std::lock_guard lock(mu_);
        return listening_;
    }

private:
    void run_acceptor(const std::vector<listening_socket>& fds, std::promise<std::string>& ready) {
        const server_thread_mark mark(&ctx_);
        std::string error;
        auto driver = backend_.create(driver_options_for(ctx_, 0), error);
        if (driver == nullptr) {
            for (const listening_socket& s : fds) {
                ::close(s.fd);
            }
            ready.set_value(error);
            return;
        }
        loop l(std::move(driver), ctx_.log, 0);
        std::vector<std::unique_ptr<listener>> listeners;
        for (std::size_t k = 0; k < fds.size(); ++k) {
            try {
                // The socket's kind rides with each connection through the queue to the thread
                // that serves it (adopt_connection).
                listeners.push_back(
                    std::make_unique<listener>(l, fds[k].fd, [this, kind = fds[k].kind](int conn_fd) {
                        enqueue({conn_fd, kind});
                    }));
            } catch (const std::bad_alloc&) {
                for (std::size_t rest = k; rest < fds.size(); ++rest) {
                    ::close(fds[rest].fd);
                }
                ready.set_value("out of memory");
                return;
            }
        }
        for (auto& lst : listeners) {
            if (!lst->start()) {
                ready.set_value(std::string(backend_.name) + ": cannot accept on the listening socket");
                return;
            }
        }
        l.on_stop([&listeners] {
            for (auto& lst : listeners) {
                lst->close();
            }
        });
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
        acceptor_done_ = true;
        if (queue_.empty()) {
            stop_workers(); // (a graceful stop waited for the acceptor)
        }
    }

    // Under mu_, once stopped_.
    void stop_workers() {
        if (workers_stopped_ || !stopped_) {
            return;
        }
        workers_stopped_ = true;
        for (auto& w : workers_) {
            if (w.loop != nullptr) {
                w.loop->stop(); // wakes a parked thread too
            }
        }
    }

    // Under mu_: a connection was queued; one parked thread comes for it. One that is running a
    // task handed to its loop (still parked) looks at the queue when the task returns: a thread
    // waiting in its loop is woken instead, if there is one.
    void wake_one_parked() {
        for (std::size_t k = parked_.size(); k-- > 0;) {
            const std::uint32_t i = parked_[k];
            parked_state& p = parking_[i];
            const bool waiting = p.parked && workers_[i].loop->busy_since_ns() == 0;
            if (p.parked && !waiting) {
                continue; // running a task: it stays listed
            }
            parked_[k] = parked_.back(); // (k's old back was looked at already, or is k)
            parked_.pop_back();
            p.listed = false;
            if (waiting) {
                p.parked = false;
                workers_[i].loop->wake();
                return;
            }
        }
    }

    // On the acceptor's thread: blocks while accept_queue connections wait (the acceptor stops
    // accepting), or with accept_queue = 0 closes a connection that no idle thread can take.
    void enqueue(queued q) {
        std::unique_lock lock(mu_);
        if (ctx_.cfg.blocking.accept_queue == 0) {
            if (!stopped_ && !has_room()) {
                lock.unlock();
                ::close(q.fd);
                note_refused();
                return;
            }
        } else {
            space_cv_.wait(lock, [this] { return stopped_ || has_room(); });
        }
        if (stopped_ && !graceful_) {
            ::close(q.fd);
            return;
        }
        queue_.push_back(q);
        update_pressure();
        wake_one_parked();
    }

    // Under mu_: connections held by a thread or queued for one, against the threads plus the
    // connections allowed to wait.
    bool has_room() const noexcept {
        const std::uint64_t taken = std::uint64_t{busy_} + queue_.size();
        return taken < std::uint64_t{ctx_.cfg.blocking.threads} + ctx_.cfg.blocking.accept_queue;
    }

    // Under mu_.
    void update_pressure() {
        const std::uint64_t taken = std::uint64_t{busy_} + queue_.size();
        ctx_.keepalive_pressure.store(taken * 4 > std::uint64_t{ctx_.cfg.blocking.threads} * 3,
                                      std::memory_order_relaxed);
        ctx_.threads_short.store(taken > ctx_.cfg.blocking.threads, std::memory_order_relaxed);
    }

    // On the acceptor's thread: a warning at most once a second, as for limits.max_connections.
    void note_refused() {
        refused_total_.fetch_add(1, std::memory_order_relaxed);
        ++refused_unlogged_;
        const auto now = std::chrono::steady_clock::now();
        if (now - refused_logged_at_ >= std::chrono::seconds(1)) {
            ctx_.log.warn("blocking: every connection thread is busy and blocking.accept_queue is 0: "
                          "closed {} connection{} since the last report",
                          refused_unlogged_, refused_unlogged_ == 1 ? "" : "s");
            refused_unlogged_ = 0;
            refused_logged_at_ = now;
        }
    }

    void run_worker(std::uint32_t i, std::promise<std::string>& ready) {
        const server_thread_mark mark(&ctx_);
        if (std::string error = workers_[i].open(backend_, ctx_, i + 1, mu_); !error.empty()) {
            ready.set_value(error);
            return;
        }
        loop& l = *workers_[i].loop;
        loop_context& lc = *workers_[i].ctx;
        l.on_stop([&lc] { lc.begin_shutdown(); });
        {
            std::lock_guard lock(mu_);
            if (workers_stopped_) {
                l.stop();
            }
        }
        ready.set_value("");
        for (;;) {
            queued q;
            {
                std::unique_lock lock(mu_);
                while (!workers_stopped_ && queue_.empty()) {
                    // Parked in the loop rather than on a condition variable: work handed to this
                    // loop after its last connection (a post or a timer for an executor a handler
                    // kept, a limiter's permit granted to a callback) runs now, not when a next
                    // connection comes, which may be never. enqueue() and stop() wake it.
                    parked_state& p = parking_[i];
                    p.parked = true;
                    if (!p.listed) {
                        p.listed = true;
                        parked_.push_back(i);
                    }
                    lock.unlock();
                    l.run_once();
                    lock.lock();
                    p.parked = false;
                }
                if (workers_stopped_) {
                    break;
                }
                q = queue_.front();
                queue_.pop_front();
                ++busy_; // the connection moves from the queue to this thread: room is unchanged
                if (queue_.empty() && acceptor_done_) {
                    stop_workers(); // a graceful stop: this was the last (its drain follows)
                }
            }
            // The loop last read the clock before this thread waited for a connection, maybe
            // long ago: the head deadline must run from now.
            l.refresh_clock();
            adopt_connection(lc, q.fd, q.kind);
            l.run(loop::run_mode::until_idle);
            {
                std::lock_guard lock(mu_);
                --busy_;
                update_pressure();
            }
            space_cv_.notify_one();
        }
        // A stop that arrived while the loop was idle: let its tasks run and release.
        l.run(loop::run_mode::until_idle);
    }

    const io::backend& backend_;
    server_context& ctx_;
    struct parked_state {
        bool parked = false; // waiting in its loop for a connection
        bool listed = false; // in parked_ (an entry stays behind after a wake for other work)
    };

    mutable std::mutex mu_;
    std::condition_variable space_cv_;
    std::vector<parked_state> parking_; // under mu_, one per connection thread
    std::vector<std::uint32_t> parked_; // under mu_: threads to wake for a queued connection
    std::deque<queued> queue_;
    std::vector<listening_socket> listening_; // under mu_: what a hand-over sends
    std::vector<loop_thread> workers_;
    loop* acceptor_ = nullptr;
    std::thread acceptor_thread_;
    std::array<std::uint16_t, max_listen_endpoints> ports_{}; // written by start() only
    std::uint32_t busy_ = 0;                                  // threads serving a connection
    bool stopped_ = false;
    bool graceful_ = false;        // stopped after a hand-over: serve what was accepted
    bool acceptor_done_ = false;   // the acceptor's loop has ended
    bool workers_stopped_ = false; // the connection threads' loops were told to stop
    std::atomic<std::uint64_t> refused_total_{0};
    std::uint64_t refused_unlogged_ = 0; // acceptor thread only
    std::chrono::steady_clock::time_point refused_logged_at_{};
};

} // namespace

std::unique_ptr<runtime> make_thread_runtime(const io::backend& b, server_context& ctx) {
    return std::make_unique<thread_runtime>(b, ctx);
}

} // namespace sluice::detail
