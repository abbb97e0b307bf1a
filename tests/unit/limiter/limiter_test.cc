// The limiter on its own (permits, the bounded FIFO queue, the wait timeout, cancel, counters),
// through try_acquire() and acquire(), whose callbacks run on a real loop thread.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sluice/limiter.h>
#include <sluice/log.h>

#include "loop/loop.h"
#include "support/backend_matrix.h"
#include "support/deadline.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

// One loop on a thread of its own, running until destroyed.
class loop_runner {
public:
    loop_runner() {
        const io::backend* b = find_backend("epoll");
        if (b == nullptr) {
            throw std::runtime_error("the epoll backend is not registered");
        }
        std::string error;
        auto driver = b->create(io::driver_options{}, error);
        if (!driver) {
            throw std::runtime_error("epoll driver: " + error);
        }
        loop_ = std::make_unique<detail::loop>(std::move(driver), log_, 0);
        loop_->retain(); // runs until stop(), not until idle
        thread_ = std::thread([this] { loop_->run(); });
    }
    ~loop_runner() { stop(); }
    loop_runner(const loop_runner&) = delete;
    loop_runner& operator=(const loop_runner&) = delete;

    void stop() {
        if (!thread_.joinable()) {
            return;
        }
        auto* l = loop_.get();
        l->executor().post([l] { l->release(); });
        l->stop();
        thread_.join();
    }
    executor exec() const { return loop_->executor(); }

private:
    logger log_{log_level::error};
    std::unique_ptr<detail::loop> loop_;
    std::thread thread_;
};

// What acquire() callbacks delivered, in order, from the loop thread.
struct outcomes {
    struct item {
        int id;
        std::error_code ec;
        bool had_permit;
        bool on_loop;
    };
    std::mutex mu;
    std::vector<item> items;
    std::vector<permit> kept;

    acquire_callback record(int id, const executor& ex, bool keep = true) {
        return [this, id, ex, keep](std::error_code ec, permit p) {
            std::lock_guard lock(mu);
            items.push_back({id, ec, static_cast<bool>(p), ex.in_loop_thread()});
            if (keep && p) {
                kept.push_back(std::move(p));
            }
        };
    }
    std::size_t size() {
        std::lock_guard lock(mu);
        return items.size();
    }
    bool wait_for(std::size_t n) {
        return wait_until([&] { return size() >= n; });
    }
    item at(std::size_t i) {
        std::lock_guard lock(mu);
        return items.at(i);
    }
    void release_first_kept() {
        permit p;
        {
            std::lock_guard lock(mu);
            p = std::move(kept.front());
            kept.erase(kept.begin());
        }
        p.release(); // outside the lock: the next grant records into this object
    }
};

TEST(limiter, rejects_bad_options) {
    EXPECT_THROW(limiter({.permits = 0}), std::invalid_argument);
    EXPECT_THROW(limiter({.permits = 1, .max_queue = 1, .wait_timeout = milliseconds(0)}),
                 std::invalid_argument);
    EXPECT_THROW(limiter({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(-1)}),
                 std::invalid_argument);
    EXPECT_NO_THROW(limiter({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)}));
}

TEST(limiter, try_acquire_takes_free_permits_and_each_is_released_once) {
    limiter lim({.permits = 2, .max_queue = 0, .wait_timeout = milliseconds(0)});
    permit a = lim.try_acquire();
    permit b = lim.try_acquire();
    permit c = lim.try_acquire();
    EXPECT_TRUE(a);
    EXPECT_TRUE(b);
    EXPECT_FALSE(c);
    EXPECT_EQ(lim.stats().in_use, 2u);
    a.release();
    a.release(); // a second release is a no-op
    EXPECT_EQ(lim.stats().in_use, 1u);
    permit moved = std::move(b);
    EXPECT_FALSE(b); // NOLINT(bugprone-use-after-move): the moved-from permit is empty
    EXPECT_EQ(lim.stats().in_use, 1u);
    moved = lim.try_acquire(); // assigning releases the permit held before
    EXPECT_EQ(lim.stats().in_use, 1u);
    moved = permit();
    EXPECT_EQ(lim.stats().in_use, 0u);
    EXPECT_EQ(lim.stats().granted, 3u);
    EXPECT_EQ(lim.stats().max_in_use, 2u);
}

TEST(limiter, permits_outlive_the_limiter_object) {
    permit p;
    {
        limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
        p = lim.try_acquire();
        ASSERT_TRUE(p);
    }
    p.release(); // the shared state is still there
}

TEST(limiter, acquire_grants_queues_and_rejects_on_the_callers_loop) {
    loop_runner loop;
    limiter lim({.permits = 1, .max_queue = 1, .wait_timeout = milliseconds(10'000)});
    outcomes out;
    lim.acquire(loop.exec(), out.record(1, loop.exec()));
    ASSERT_TRUE(out.wait_for(1));
    lim.acquire(loop.exec(), out.record(2, loop.exec())); // waits
    lim.acquire(loop.exec(), out.record(3, loop.exec())); // the queue is full
    ASSERT_TRUE(out.wait_for(2));
    EXPECT_EQ(out.at(1).id, 3);
    EXPECT_EQ(out.at(1).ec, limit_errc::queue_full);
    EXPECT_FALSE(out.at(1).had_permit);
    auto s = lim.stats();
    EXPECT_EQ(s.in_use, 1u);
    EXPECT_EQ(s.queued, 1u);
    EXPECT_EQ(s.rejected, 1u);

    out.release_first_kept(); // 1's permit goes straight to 2
    ASSERT_TRUE(out.wait_for(3));
    EXPECT_EQ(out.at(2).id, 2);
    EXPECT_FALSE(out.at(2).ec);
    EXPECT_TRUE(out.at(2).had_permit);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(out.at(i).on_loop) << "callback " << i << " ran off the caller's loop";
    }
    s = lim.stats();
    EXPECT_EQ(s.in_use, 1u);
    EXPECT_EQ(s.queued, 0u);
    EXPECT_EQ(s.granted, 2u);
    out.release_first_kept();
    EXPECT_EQ(lim.stats().in_use, 0u);
}

TEST(limiter, waiters_are_served_first_come_first_served) {
    loop_runner loop;
    limiter lim({.permits = 1, .max_queue = 16, .wait_timeout = milliseconds(10'000)});
    permit held = lim.try_acquire();
    outcomes out;
    for (int i = 0; i < 8; ++i) {
        lim.acquire(loop.exec(), out.record(i, loop.exec()));
    }
    EXPECT_EQ(lim.stats().queued, 8u);
    // A newcomer does not overtake the queue, even right after a release hands a permit over.
    held.release();
    EXPECT_FALSE(lim.try_acquire());
    for (int i = 0; i < 8; ++i) {
        ASSERT_TRUE(out.wait_for(static_cast<std::size_t>(i) + 1));
        EXPECT_EQ(out.at(static_cast<std::size_t>(i)).id, i);
        EXPECT_EQ(lim.stats().in_use, 1u);
        out.release_first_kept();
    }
    EXPECT_EQ(lim.stats().in_use, 0u);
    EXPECT_EQ(lim.stats().granted, 9u);
}

TEST(limiter, a_waiter_times_out_and_leaves_the_queue) {
    loop_runner loop;
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(60)});
    permit held = lim.try_acquire();
    outcomes out;
    const auto from = test_clock::now();
    lim.acquire(loop.exec(), out.record(1, loop.exec()));
    ASSERT_TRUE(out.wait_for(1));
    EXPECT_GE(test_clock::now() - from, milliseconds(55));
    EXPECT_EQ(out.at(0).ec, limit_errc::wait_timed_out);
    EXPECT_FALSE(out.at(0).had_permit);
    auto s = lim.stats();
    EXPECT_EQ(s.timed_out, 1u);
    EXPECT_EQ(s.queued, 0u);
    held.release();
    EXPECT_EQ(lim.stats().in_use, 0u) << "a timed-out waiter is not handed a permit";
}

TEST(limiter, cancel_takes_a_waiter_out_once) {
    loop_runner loop;
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    permit held = lim.try_acquire();
    outcomes out;
    wait_handle h = lim.acquire(loop.exec(), out.record(1, loop.exec()));
    EXPECT_TRUE(h.cancel());
    EXPECT_FALSE(h.cancel());
    ASSERT_TRUE(out.wait_for(1));
    EXPECT_EQ(out.at(0).ec, limit_errc::cancelled);
    EXPECT_EQ(lim.stats().cancelled, 1u);
    EXPECT_EQ(lim.stats().queued, 0u);
    held.release();
    EXPECT_EQ(lim.stats().in_use, 0u);
    EXPECT_FALSE(wait_handle().cancel());
}

// A wait that ended otherwise (granted, cancelled) withdraws its timer: a long wait_timeout
// would otherwise keep each finished wait's timer, with the limiter's core, until it passed
// (found by review: 20,000 waits left 20,000 references for an hour).
TEST(limiter, a_finished_wait_withdraws_its_timer) {
    loop_runner loop;
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = std::chrono::hours(1)});
    permit held = lim.try_acquire();
    outcomes out;
    wait_handle cancelled = lim.acquire(loop.exec(), out.record(1, loop.exec(), false));
    lim.acquire(loop.exec(), out.record(2, loop.exec(), false));
    EXPECT_TRUE(cancelled.cancel());
    held.release(); // granted to 2, whose callback drops the permit
    ASSERT_TRUE(out.wait_for(2));
    EXPECT_EQ(out.at(0).ec, limit_errc::cancelled);
    EXPECT_FALSE(out.at(1).ec) << out.at(1).ec.message();
    EXPECT_TRUE(wait_until([&] { return lim.core().use_count() == 1; }))
        << lim.core().use_count() - 1 << " references to the core left behind by finished waits";
    EXPECT_EQ(lim.stats().in_use, 0u);
}

TEST(limiter, a_grant_to_a_stopped_loop_is_released) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    executor gone;
    {
        loop_runner loop;
        gone = loop.exec();
    }
    bool ran = false;
    lim.acquire(gone, [&ran](std::error_code, permit) { ran = true; });
    EXPECT_FALSE(ran);
    EXPECT_EQ(lim.stats().in_use, 0u) << "the permit of a callback that cannot run is given back";

    loop_runner live;
    permit held = lim.try_acquire();
    lim.acquire(gone, [&ran](std::error_code, permit) { ran = true; });
    EXPECT_EQ(lim.stats().queued, 0u) << "a waiter whose loop stopped cannot time out: it is not queued";
    held.release();
    EXPECT_EQ(lim.stats().in_use, 0u);
    EXPECT_FALSE(ran);
    EXPECT_THROW(lim.acquire(executor(), [](std::error_code, permit) {}), std::invalid_argument);
}

TEST(limiter, a_waiter_whose_loop_stops_while_it_waits_leaves_the_queue) {
    limiter lim({.permits = 1, .max_queue = 1, .wait_timeout = milliseconds(200)});
    permit held = lim.try_acquire();
    ASSERT_TRUE(held);
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> captured = alive;
    bool ran = false;
    {
        loop_runner a;
        lim.acquire(a.exec(), [&ran, alive = std::move(alive)](std::error_code, permit) { ran = true; });
        ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 1; }));
        // Let the loop arm the wait's timer, then stop it with the waiter still queued.
        std::this_thread::sleep_for(milliseconds(50));
    }
    EXPECT_EQ(lim.stats().queued, 0u) << "nothing on a stopped loop will ever time it out";
    EXPECT_TRUE(captured.expired()) << "the callback is dropped unrun with its loop";
    EXPECT_FALSE(ran);

    // Its slot is free again for a waiter on a live loop.
    loop_runner b;
    outcomes got;
    lim.acquire(b.exec(), got.record(1, b.exec()));
    held.release();
    ASSERT_TRUE(got.wait_for(1));
    EXPECT_EQ(got.at(0).ec, std::error_code());
    EXPECT_TRUE(got.at(0).had_permit);
}

// Many threads and two loops at once: no permit is lost or granted twice (TSan watches).
TEST(limiter, concurrent_acquire_and_release_keep_the_books) {
    loop_runner l1;
    loop_runner l2;
    constexpr std::size_t permits = 3;
    limiter lim({.permits = permits, .max_queue = 8, .wait_timeout = milliseconds(2000)});
    std::atomic<int> holders{0};
    std::atomic<int> max_holders{0};
    std::atomic<int> done{0};
    std::atomic<int> failed{0};
    constexpr int threads = 4;
    constexpr int per_thread = 200;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            const executor ex = t % 2 == 0 ? l1.exec() : l2.exec();
            for (int i = 0; i < per_thread; ++i) {
                if (i % 3 == 0) {
                    if (permit p = lim.try_acquire()) {
                        const int h = holders.fetch_add(1) + 1;
                        EXPECT_LE(h, static_cast<int>(permits));
                        holders.fetch_sub(1);
                    }
                    done.fetch_add(1);
                    continue;
                }
                lim.acquire(ex, [&](std::error_code ec, permit p) {
                    if (ec) {
                        failed.fetch_add(1);
                    } else {
                        const int h = holders.fetch_add(1) + 1;
                        int m = max_holders.load();
                        while (h > m && !max_holders.compare_exchange_weak(m, h)) {
                        }
                        holders.fetch_sub(1);
                        p.release();
                    }
                    done.fetch_add(1);
                });
            }
        });
    }
    for (auto& t : ts) {
        t.join();
    }
    ASSERT_TRUE(wait_until([&] { return done.load() == threads * per_thread; }, milliseconds(20'000)));
    EXPECT_LE(max_holders.load(), static_cast<int>(permits));
    const auto s = lim.stats();
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.queued, 0u);
    EXPECT_LE(s.max_in_use, permits);
    EXPECT_EQ(static_cast<int>(s.rejected + s.timed_out), failed.load());
}

TEST(limiter, error_codes_have_messages) {
    std::error_code ec = limit_errc::queue_full;
    EXPECT_EQ(ec.category().name(), std::string("sluice.limiter"));
    EXPECT_NE(ec.message(), std::error_code(limit_errc::wait_timed_out).message());
}

} // namespace
} // namespace sluice::test
