// The resolver thread of a client (see upstream_refresher.h).
#include "client/upstream_refresher.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace sluice::detail {

upstream_refresher::upstream_refresher(std::shared_ptr<upstream_state> up, logger log)
    : s_(std::make_shared<shared>()) {
    s_->up = std::move(up);
    s_->log = std::move(log);
}

upstream_refresher::~upstream_refresher() {
    stop();
}

void upstream_refresher::start() noexcept {
    if (started_.load(std::memory_order_acquire)) {
        return; // every call but the first: no lock shared by the loops
    }
    std::lock_guard lock(mu_);
    if (started_.load(std::memory_order_relaxed) || stopped_ || !s_->up->refreshes()) {
        return;
    }
    // Once: a thread that could not be created is not retried on every call.
    started_.store(true, std::memory_order_release);
    try {
        thread_ = std::thread([s = s_] { run(s); });
    } catch (const std::exception& e) {
        std::lock_guard l(s_->mu);
        s_->log.error("client: cannot start the resolver thread ({}): upstream addresses are not looked up "
                      "again",
                      e.what());
    }
}

void upstream_refresher::stop() noexcept {
    std::lock_guard lock(mu_);
    if (stopped_) {
        return;
    }
    stopped_ = true;
    if (!thread_.joinable()) {
        return;
    }
    std::unique_lock l(s_->mu);
    s_->stop = true;
    s_->cv.notify_all();
    if (s_->cv.wait_for(l, stop_wait, [this] { return s_->done; })) {
        l.unlock();
        thread_.join();
    } else {
        l.unlock();
        thread_.detach(); // a lookup hangs: see the header
    }
}

void upstream_refresher::run(const std::shared_ptr<shared>& s) noexcept {
    upstream_state& up = *s->up;
    // Clamped to a year: steady_clock counts nanoseconds, and a huge interval would overflow
    // the deadline (a year is "never" for a process, and far below the limit).
    const auto interval =
        std::min<std::chrono::milliseconds>(up.options().resolve_interval, std::chrono::hours(24 * 365));
    const auto& hosts = up.hosts();
    using steady = std::chrono::steady_clock;
    // Per host: when a failed lookup may be warned about again.
    std::vector<steady::time_point> warn_after(hosts.size(), steady::time_point::min());
    steady::time_point next = up.created_at + interval;
    for (;;) {
        {
            std::unique_lock l(s->mu);
            if (s->cv.wait_until(l, next, [&] { return s->stop; })) {
                break;
            }
        }
        std::vector<std::optional<lookup_result>> results(hosts.size());
        try {
            for (std::size_t i = 0; i < hosts.size(); ++i) {
                if (!hosts[i].literal) {
                    results[i] = up.lookup(hosts[i]); // blocks, unbounded: the reason for this thread
                }
            }
        } catch (...) {
            results.assign(hosts.size(), std::nullopt); // out of memory: nothing changes this round
        }
        std::lock_guard l(s->mu);
        if (s->stop) {
            break;
        }
        const steady::time_point now = steady::now();
        next = now + interval;
        try {
            up.apply(results);
        } catch (...) {
            continue; // out of memory: the current set stays; the next round tries again
        }
        for (std::size_t i = 0; i < hosts.size(); ++i) {
            if (!results[i]) {
                continue;
            }
            if (results[i]->addresses) {
                continue;
            }
            if (now >= warn_after[i]) {
                try {
                    s->log.warn("client: upstream \"{}\" does not resolve ({}); keeping its last addresses",
                                up.names()[i], results[i]->error);
                } catch (...) {
                    // The sink threw: nothing else to tell.
                }
                warn_after[i] = now + warn_every;
            }
        }
    }
    std::lock_guard l(s->mu);
    s->done = true;
    s->cv.notify_all();
}

} // namespace sluice::detail
