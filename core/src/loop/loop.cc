#include "loop/loop.h"

#include <algorithm>
#include <cerrno>
#include <exception>
#include <memory>
#include <system_error>

namespace sluice::detail {

namespace {

// A call_after timer: owns its callback, deletes itself when it fires.
struct posted_timer : timer {
    explicit posted_timer(std::function<void()> f, const logger& l)
        : timer(&fire_posted), fn(std::move(f)), log(&l) {
        owned_by_loop = true;
    }
    std::function<void()> fn;
    const logger* log;

    static void fire_posted(timer& t) noexcept {
        auto* p = static_cast<posted_timer*>(&t);
        auto fn = std::move(p->fn);
        const logger* log = p->log;
        delete p;
        try {
            fn();
        } catch (const std::exception& e) {
            log->error("timer callback threw: {}", e.what());
        } catch (...) {
            log->error("timer callback threw a non-exception");
        }
    }
};

std::int64_t steady_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

} // namespace

loop::loop(std::unique_ptr<io::driver> driver, const logger& log, unsigned index)
    : driver_(std::move(driver)), log_(log), index_(index), now_(clock::now()) {
    port_ = std::make_shared<loop_port>(*this, *driver_);
    completions_.reserve(256);
}

loop::~loop() {
    std::vector<loop_port::task> leftovers;
    port_->close(leftovers);
    leftovers.clear(); // destroy the tasks (and what they captured) before the driver goes
    drop_owned_timers();
}

void loop::drop_owned_timers() noexcept {
    // Timers owned by the loop (post_after) die with it; other timers belong to objects that
    // are gone.
    std::vector<timer*> owned;
    for (timer* t : timers_.armed_timers()) {
        if (t->owned_by_loop) {
            owned.push_back(t);
        }
    }
    for (timer* t : owned) {
        timers_.cancel(*t);
        delete static_cast<posted_timer*>(t);
    }
}

void loop::close_port() {
    // executor.h: once the loop has stopped, post() refuses (returns false) instead of
    // accepting tasks that would never run. Tasks accepted before the close still run here,
    // on the loop thread (they may release references); post_after timers that have not fired
    // are destroyed without running, so nothing they captured outlives the stop.
    std::vector<loop_port::task> leftovers;
    port_->close(leftovers);
    run_tasks(leftovers);
    drop_owned_timers();
}

void loop::run_tasks(std::vector<loop_port::task>& tasks) {
    for (auto& t : tasks) {
        // A posted task is user code (executor::post, a client callback), as a timer's is: what
        // it throws is logged, not let out of the loop's thread (std::terminate).
        try {
            t();
        } catch (const std::exception& e) {
            log_.error("posted task threw: {}", e.what());
        } catch (...) {
            log_.error("posted task threw a non-exception");
        }
    }
    tasks.clear();
}

timer* loop::call_after(std::chrono::milliseconds delay, std::function<void()> fn) {
    auto t = std::make_unique<posted_timer>(std::move(fn), log_);
    timers_.arm(*t, deadline_after(now_, delay)); // may throw (the heap grows): t is freed then
    return t.release();
}

void loop::cancel_call(timer* t) noexcept {
    timers_.cancel(*t);
    delete static_cast<posted_timer*>(t);
}

void loop::defer(deferred& d) {
    if (!d.scheduled_) {
        d.scheduled_ = true;
        deferred_.push_back(&d);
    }
}

void loop::stop() {
    stop_requested_.store(true, std::memory_order_relaxed);
    // Through the mailbox, so stopping_ is only ever touched on the loop thread.
    port_->post([this] { stopping_ = true; });
}

void loop::run(run_mode mode) {
    port_->set_serves_one_connection(mode == run_mode::until_idle);
    port_->set_owner_thread(std::this_thread::get_id());
    for (;;) {
        if (stopping_ && !stop_hooks_ran_) {
            stop_hooks_ran_ = true;
            run_hooks(stop_hooks_);
        }
        if (stopping_ && live_ == background_ && !drained_hooks_ran_) {
            drained_hooks_ran_ = true;
            run_drained_hooks();
        }
        if (live_ == 0 && (stopping_ || mode == run_mode::until_idle)) {
            break;
        }
        run_iteration(true);
    }
    // Tasks posted after the last iteration still run: they may release references.
    port_->drain(tasks_);
    run_tasks(tasks_);
    if (stopping_) {
        close_port(); // stopped for good (a thread-per-connection loop also ends when idle)
    }
}

void loop::run_once() {
    port_->set_owner_thread(std::this_thread::get_id());
    run_iteration(true);
}

void loop::on_drained(std::weak_ptr<const void> owner, std::function<void()> fn) {
    if (drained_hooks_ran_) {
        if (const auto alive = owner.lock()) {
            fn();
        }
        return;
    }
    if (drained_hooks_.size() >= drained_prune_at_) {
        std::erase_if(drained_hooks_, [](const drained_hook& h) { return h.owner.expired(); });
        drained_prune_at_ = std::max<std::size_t>(16, drained_hooks_.size() * 2); // amortised O(1)
    }
    drained_hooks_.push_back({std::move(owner), std::move(fn)});
}

void loop::run_drained_hooks() {
    auto run = std::move(drained_hooks_);
    for (auto& h : run) {
        if (const auto alive = h.owner.lock()) {
            h.fn();
        }
    }
}

void loop::run_hooks(std::vector<std::function<void()>>& hooks) {
    auto run = std::move(hooks);
    for (auto& h : run) {
        h();
    }
}

std::chrono::nanoseconds loop::wait_timeout(bool block) const {
    if (!block || !deferred_.empty() || port_->has_tasks()) {
        return std::chrono::nanoseconds(0);
    }
    if (timers_.empty()) {
        return std::chrono::nanoseconds(-1);
    }
    auto d = timers_.next() - clock::now();
    return d < std::chrono::nanoseconds(0) ? std::chrono::nanoseconds(0) : d;
}

void loop::run_iteration(bool block) {
    completions_.clear();
    const int n = driver_->wait(wait_timeout(block), completions_);
    if (n < 0 && n != -EINTR) {
        log_.error("loop {}: wait failed: {}", index_, std::system_category().message(-n));
    }
    now_ = clock::now();
    busy_since_.store(steady_ns(), std::memory_order_relaxed);

    // 1. Completions. Every lent buffer goes back right after its owner saw it (rule 5 of
    //    backend.h), so a driver's pool never runs dry between two waits.
    for (const io::completion& c : completions_) {
        static_cast<io_handler*>(c.owner)->on_io(c);
        if (c.buffer != io::no_buffer) {
            driver_->release(c.buffer);
        }
    }
    // 2. Mailbox.
    port_->drain(tasks_);
    run_tasks(tasks_);
    // 3. Timers due by the time we got here.
    now_ = clock::now();
    while (timer* t = timers_.pop_due(now_)) {
        t->fire(*t);
    }
    // 4. End-of-iteration work (corked writes). Deferred work may defer more: loop until none.
    while (!deferred_.empty()) {
        deferred_running_.swap(deferred_);
        for (deferred* d : deferred_running_) {
            d->scheduled_ = false;
            d->run_deferred();
        }
        deferred_running_.clear();
    }
    busy_since_.store(0, std::memory_order_relaxed);
}

} // namespace sluice::detail
