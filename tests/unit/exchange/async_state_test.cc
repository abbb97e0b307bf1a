// The async state machine on its own: transitions, the deferral rule, one terminal
// transition under races, and handles that outlive everything.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sluice/log.h>

#include "exchange/async_state.h"
#include "fakes/fake_driver.h"
#include "loop/loop.h"

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;

struct recording_host final : async_host {
    std::vector<std::string> seen;
    void on_async_signal(std::uint64_t g) noexcept override { seen.push_back("signal:" + std::to_string(g)); }
    void on_async_timeout_changed(std::uint64_t g) noexcept override {
        seen.push_back("timeout:" + std::to_string(g));
    }
    void on_async_drain_wanted(std::uint64_t g) noexcept override {
        seen.push_back("drain:" + std::to_string(g));
    }
};

struct fixture : ::testing::Test {
    logger log{log_level::error};
    detail::loop loop{std::make_unique<testing::fake_driver>(), log, 0};
    recording_host host;

    // A state as start_async() leaves it: one reference, owned here.
    async_state* make() { return new async_state(loop.executor_port(), &host, 7); }
    void run_posted() { loop.run(detail::loop::run_mode::until_idle); }
};

TEST_F(fixture, sync_dispatch_finishes) {
    async_context ctx(make());
    EXPECT_EQ(ctx.state()->handler_returned(), async_state::after_dispatch::finish);
    EXPECT_FALSE(ctx.complete()); // never started: nothing to complete
}

TEST_F(fixture, complete_before_the_handler_returns_is_deferred) {
    async_context ctx(make());
    async_state* st = ctx.state();
    ASSERT_TRUE(st->start(milliseconds(100)));
    EXPECT_TRUE(ctx.complete(response(201)));
    EXPECT_FALSE(ctx.complete(response(202))) << "only the first completion counts";
    EXPECT_FALSE(ctx.resume());
    run_posted();
    EXPECT_TRUE(host.seen.empty()) << "a deferred completion posts nothing: the return acts on it";
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::complete);
    std::optional<response> handed;
    ASSERT_TRUE(st->take_completion(handed));
    ASSERT_TRUE(handed.has_value());
    EXPECT_EQ(handed->status(), 201);
    EXPECT_TRUE(ctx.is_done());
}

TEST_F(fixture, resume_before_return_is_deferred_and_the_state_can_start_again) {
    async_context ctx(make());
    async_state* st = ctx.state();
    ASSERT_TRUE(st->start(milliseconds(0)));
    EXPECT_TRUE(ctx.resume());
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::resume);
    ASSERT_TRUE(st->begin_resume());
    EXPECT_FALSE(ctx.is_done());
    ASSERT_TRUE(st->start(milliseconds(0))); // the resumed handler suspends again
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
    EXPECT_TRUE(ctx.complete());
    run_posted();
    EXPECT_EQ(host.seen, (std::vector<std::string>{"signal:7"}));
}

// Between a winning resume() and the resumed dispatch's own start_async() there is no timer to
// change: a set_timeout() then would be dropped by that start_async() while it said true.
TEST_F(fixture, set_timeout_is_refused_while_no_suspension_could_use_it) {
    async_context ctx(make());
    async_state* st = ctx.state();
    EXPECT_FALSE(ctx.set_timeout(milliseconds(60'000))) << "idle: start_async() not called yet";
    ASSERT_TRUE(st->start(milliseconds(1000)));
    EXPECT_TRUE(ctx.set_timeout(milliseconds(2000))) << "started: armed with it when the handler returns";
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
    EXPECT_EQ(st->take_timeout(), milliseconds(2000));
    ASSERT_TRUE(ctx.resume());
    EXPECT_FALSE(ctx.set_timeout(milliseconds(60'000))) << "resuming";
    ASSERT_TRUE(st->begin_resume());
    EXPECT_FALSE(ctx.set_timeout(milliseconds(60'000))) << "the resumed dispatch, before start_async()";
    ASSERT_TRUE(st->start(milliseconds(1000)));
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
    EXPECT_EQ(st->take_timeout(), milliseconds(1000));
    EXPECT_TRUE(ctx.complete());
    run_posted();
}

TEST_F(fixture, set_timeout_is_refused_after_a_resume_deferred_while_the_handler_runs) {
    async_context ctx(make());
    async_state* st = ctx.state();
    ASSERT_TRUE(st->start(milliseconds(1000)));
    ASSERT_TRUE(ctx.resume()); // started_resume: acts when the handler returns
    EXPECT_FALSE(ctx.set_timeout(milliseconds(60'000)));
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::resume);
    ASSERT_TRUE(st->begin_resume());
    ASSERT_TRUE(st->start(milliseconds(1000)));
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
    EXPECT_EQ(st->take_timeout(), milliseconds(1000));
    EXPECT_TRUE(ctx.complete());
    run_posted();
}

TEST_F(fixture, complete_while_suspended_signals_the_loop_once) {
    async_context ctx(make());
    async_state* st = ctx.state();
    st->start(milliseconds(0));
    st->handler_returned();
    std::thread t([ctx]() mutable { EXPECT_TRUE(ctx.complete(response(200))); });
    t.join();
    EXPECT_FALSE(ctx.complete());
    run_posted();
    EXPECT_EQ(host.seen, (std::vector<std::string>{"signal:7"}));
}

// complete() winning is the terminal transition, also before the loop took the response
// (completing) or the handler returned (started_complete): what would never run is refused,
// so a caller that cleans up on false does; on_complete still runs, so it is still accepted.
TEST_F(fixture, after_a_winning_complete_only_on_complete_is_accepted) {
    for (const bool while_running : {true, false}) {
        async_context ctx(make());
        async_state* st = ctx.state();
        ASSERT_TRUE(st->start(milliseconds(100)));
        if (!while_running) {
            ASSERT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
        }
        ASSERT_TRUE(ctx.complete());
        const std::string at = while_running ? "started_complete" : "completing";
        EXPECT_TRUE(ctx.is_done()) << at;
        EXPECT_FALSE(ctx.set_timeout(milliseconds(5000))) << at;
        EXPECT_FALSE(ctx.set_timeout_status(504)) << at;
        EXPECT_FALSE(ctx.on_timeout([](const async_event&) {})) << at;
        EXPECT_FALSE(ctx.on_error([](const async_event&) {})) << at;
        EXPECT_FALSE(ctx.on_drained([] {})) << at;
        EXPECT_TRUE(ctx.on_complete([](const async_event&) {})) << at;
        run_posted();
    }
}

// A set_timeout() made while suspended reaches the host through its mailbox. Until the host
// has taken it, the old deadline firing must not begin the timeout: the change came first.
TEST_F(fixture, an_extension_not_yet_taken_by_the_host_holds_off_the_old_deadline) {
    async_context ctx(make());
    async_state* st = ctx.state();
    ASSERT_TRUE(st->start(milliseconds(100)));
    ASSERT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
    EXPECT_EQ(st->take_timeout(), milliseconds(100)); // the host arms its timer
    ASSERT_TRUE(ctx.set_timeout(milliseconds(5000)));
    EXPECT_FALSE(st->begin_timeout()) << "the old deadline won over an accepted extension";
    EXPECT_EQ(st->take_timeout(), milliseconds(5000)); // the signal: the host re-arms
    EXPECT_TRUE(st->begin_timeout()) << "the new deadline must still end it";
    run_posted();
    EXPECT_EQ(host.seen, (std::vector<std::string>{"timeout:7"}));
}

TEST_F(fixture, a_drain_callback_set_while_the_handler_runs_is_taken_once_suspended) {
    async_context ctx(make());
    async_state* st = ctx.state();
    ASSERT_TRUE(st->start(milliseconds(0)));
    int ran = 0;
    EXPECT_TRUE(ctx.on_drained([&ran] { ++ran; }));
    EXPECT_TRUE(st->drain_wanted());
    EXPECT_FALSE(st->take_drain_callback()) << "not suspended yet: the handler still writes";
    run_posted();
    EXPECT_TRUE(host.seen.empty()) << "the host looks when the handler returns";
    EXPECT_EQ(st->handler_returned(), async_state::after_dispatch::suspend);
    auto fn = st->take_drain_callback();
    ASSERT_TRUE(fn);
    fn();
    EXPECT_EQ(ran, 1);
    EXPECT_FALSE(st->take_drain_callback()) << "one-shot";
}

TEST_F(fixture, a_drain_callback_set_while_suspended_signals_the_loop) {
    async_context ctx(make());
    async_state* st = ctx.state();
    st->start(milliseconds(0));
    st->handler_returned();
    std::thread t([ctx]() mutable { EXPECT_TRUE(ctx.on_drained([] {})); });
    t.join();
    run_posted();
    EXPECT_EQ(host.seen, (std::vector<std::string>{"drain:7"}));
}

TEST_F(fixture, a_drain_callback_is_refused_after_the_end_and_dropped_by_detach) {
    auto probe = std::make_shared<int>(0);
    {
        async_context ctx(make());
        async_state* st = ctx.state();
        st->start(milliseconds(0));
        st->handler_returned();
        // The usual callback holds a handle to its own state: detach must break the cycle.
        EXPECT_TRUE(ctx.on_drained([ctx, probe] {}));
        EXPECT_TRUE(st->fail());
        EXPECT_FALSE(st->take_drain_callback()) << "done: never run after the terminal transition";
        EXPECT_FALSE(ctx.on_drained([] {}));
        st->detach();
        EXPECT_FALSE(st->drain_wanted());
    }
    EXPECT_EQ(probe.use_count(), 1) << "the dropped callback (and the state) were freed";
}

TEST_F(fixture, timeout_listeners_may_complete_and_then_the_timeout_does_not_end_it) {
    async_context ctx(make());
    async_state* st = ctx.state();
    st->start(milliseconds(10));
    st->handler_returned();
    ASSERT_TRUE(st->begin_timeout());
    EXPECT_TRUE(ctx.complete(response(504))); // as an on_timeout listener would
    EXPECT_EQ(st->finish_timeout(), async_state::timeout_outcome::taken);
    std::optional<response> handed;
    ASSERT_TRUE(st->take_completion(handed));
    EXPECT_EQ(handed->status(), 504);
}

TEST_F(fixture, set_timeout_while_timing_out_rearms_unless_a_listener_completes) {
    async_context ctx(make());
    async_state* st = ctx.state();
    st->start(milliseconds(10));
    st->handler_returned();
    ASSERT_TRUE(st->begin_timeout());
    EXPECT_TRUE(ctx.set_timeout(milliseconds(500))); // as an on_timeout listener would
    EXPECT_EQ(st->finish_timeout(), async_state::timeout_outcome::rearmed);
    EXPECT_EQ(st->phase(), async_phase::suspended);
    EXPECT_EQ(st->timeout(), milliseconds(500));
    EXPECT_FALSE(ctx.is_done());
    // The next expiry without a re-arm ends it.
    ASSERT_TRUE(st->begin_timeout());
    EXPECT_EQ(st->finish_timeout(), async_state::timeout_outcome::expired);
    EXPECT_TRUE(ctx.is_done());
    EXPECT_FALSE(ctx.set_timeout(milliseconds(500)));

    async_context other(make());
    async_state* st2 = other.state();
    st2->start(milliseconds(10));
    st2->handler_returned();
    ASSERT_TRUE(st2->begin_timeout());
    EXPECT_TRUE(other.set_timeout(milliseconds(500)));
    EXPECT_TRUE(other.complete(response(200)));
    EXPECT_EQ(st2->finish_timeout(), async_state::timeout_outcome::taken) << "the completion wins";
}

TEST_F(fixture, the_expiry_hook_is_taken_once_and_dropped_by_detach) {
    async_context ctx(make());
    async_state* st = ctx.state();
    st->start(milliseconds(10));
    EXPECT_FALSE(st->set_expiry_hook({}));
    int ran = 0;
    EXPECT_TRUE(st->set_expiry_hook([&ran] { ++ran; }));
    st->handler_returned();
    // A re-armed timeout keeps the hook for the next expiry (the connection takes it only then).
    ASSERT_TRUE(st->begin_timeout());
    EXPECT_TRUE(ctx.set_timeout(milliseconds(500)));
    EXPECT_EQ(st->finish_timeout(), async_state::timeout_outcome::rearmed);
    ASSERT_TRUE(st->begin_timeout());
    EXPECT_EQ(st->finish_timeout(), async_state::timeout_outcome::expired);
    auto hook = st->take_expiry_hook();
    ASSERT_TRUE(hook);
    hook();
    EXPECT_EQ(ran, 1);
    EXPECT_FALSE(st->take_expiry_hook()) << "taken once";
    EXPECT_FALSE(st->set_expiry_hook([] {})) << "done";

    async_context other(make());
    async_state* st2 = other.state();
    st2->start(milliseconds(10));
    EXPECT_TRUE(st2->set_expiry_hook([] {}));
    EXPECT_TRUE(st2->fail());
    st2->detach();
    EXPECT_FALSE(st2->take_expiry_hook()) << "detach drops it: it points at a released runner";
}

TEST_F(fixture, listeners_run_in_place_in_order_and_stay_for_the_next_event) {
    async_context ctx(make());
    async_state* st = ctx.state();
    st->start(milliseconds(10));
    std::vector<std::string> ran;
    ASSERT_TRUE(ctx.on_timeout([&](const async_event&) { ran.emplace_back("t1"); }));
    ASSERT_TRUE(ctx.on_complete([&](const async_event&) { ran.emplace_back("c1"); }));
    ASSERT_TRUE(ctx.on_timeout([&](const async_event&) {
        ran.emplace_back("t2");
        // Registered while the event runs: waits for the next one; the vector may grow under it.
        for (int i = 0; i < 8; ++i) {
            EXPECT_TRUE(ctx.on_timeout([&](const async_event&) { ran.emplace_back("late"); }));
        }
    }));
    const auto run = [&](async_event_kind kind) {
        st->run_listeners(kind, [&](const async_listener& l) noexcept { l(async_event{kind, {}, ctx}); });
    };
    run(async_event_kind::timeout);
    EXPECT_EQ(ran, (std::vector<std::string>{"t1", "t2"}));
    ran.clear();
    run(async_event_kind::complete);
    EXPECT_EQ(ran, std::vector<std::string>{"c1"});
    ran.clear();
    run(async_event_kind::timeout);
    EXPECT_EQ(ran.size(), 2u + 8u) << "every listener is back in its slot";
    EXPECT_EQ(ran[0], "t1");
    EXPECT_EQ(ran[1], "t2");
}

TEST_F(fixture, a_throw_after_an_accepted_complete_or_resume_changes_nothing) {
    async_context done_first(make());
    async_state* a = done_first.state();
    a->start(milliseconds(100));
    EXPECT_TRUE(done_first.complete(response(201)));
    EXPECT_EQ(a->handler_threw(), async_state::after_dispatch::complete);
    EXPECT_EQ(a->handler_returned(), async_state::after_dispatch::complete);

    async_context resumed(make());
    async_state* b = resumed.state();
    b->start(milliseconds(100));
    EXPECT_TRUE(resumed.resume());
    EXPECT_EQ(b->handler_threw(), async_state::after_dispatch::resume);
    EXPECT_EQ(b->handler_returned(), async_state::after_dispatch::resume);

    async_context nothing(make());
    async_state* c = nothing.state();
    c->start(milliseconds(100));
    EXPECT_EQ(c->handler_threw(), async_state::after_dispatch::fail);
    EXPECT_TRUE(nothing.is_done());
    EXPECT_FALSE(nothing.complete(response(200))) << "the throw ended it";
    EXPECT_EQ(c->handler_threw(), async_state::after_dispatch::finish) << "already ended";
}

TEST_F(fixture, set_timeout_status_accepts_only_5xx) {
    async_context ctx(make());
    EXPECT_FALSE(ctx.set_timeout_status(200));
    EXPECT_FALSE(ctx.set_timeout_status(600));
    EXPECT_TRUE(ctx.set_timeout_status(504));
    EXPECT_EQ(ctx.state()->timeout_status(), 504);
}

TEST_F(fixture, on_complete_is_claimed_exactly_once) {
    async_context ctx(make());
    EXPECT_TRUE(ctx.state()->claim_on_complete());
    EXPECT_FALSE(ctx.state()->claim_on_complete());
    EXPECT_TRUE(ctx.is_done());
    EXPECT_FALSE(ctx.on_complete([](const async_event&) {})) << "listeners after the end are refused";
}

// Many threads complete while the loop times out: exactly one terminal transition.
TEST_F(fixture, complete_racing_timeout_and_error_has_exactly_one_winner) {
    for (int round = 0; round < 300; ++round) {
        async_context ctx(make());
        async_state* st = ctx.state();
        st->start(milliseconds(1));
        st->handler_returned();
        std::atomic<int> go{0};
        std::atomic<int> completes{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < 3; ++i) {
            threads.emplace_back([&, ctx]() mutable {
                while (go.load() == 0) {
                }
                completes += ctx.complete(response(200)) ? 1 : 0;
            });
        }
        go = 1;
        int loop_wins = 0;
        if (round % 2 == 0) {
            if (st->begin_timeout() && st->finish_timeout() == async_state::timeout_outcome::expired) {
                ++loop_wins;
            }
        } else if (st->fail()) {
            ++loop_wins;
        }
        for (auto& t : threads) {
            t.join();
        }
        std::optional<response> handed;
        const int completion_wins = st->take_completion(handed) ? 1 : 0;
        EXPECT_EQ(loop_wins + completion_wins, 1) << "round " << round;
        EXPECT_EQ(completes.load(), completion_wins) << "a complete() that returned true must be the winner";
        EXPECT_TRUE(ctx.is_done());
        run_posted();
    }
}

TEST_F(fixture, a_handle_outlives_its_loop_and_does_nothing) {
    async_context ctx;
    {
        logger l(log_level::error);
        auto lp = std::make_unique<detail::loop>(std::make_unique<testing::fake_driver>(), l, 1);
        recording_host h;
        async_state* st = new async_state(lp->executor_port(), &h, 1);
        ctx = async_context(st);
        st->start(milliseconds(0));
        st->handler_returned();
        st->fail();
        st->detach();
        lp.reset(); // the loop (and its port's driver) are gone
    }
    EXPECT_TRUE(ctx.is_done());
    EXPECT_FALSE(ctx.complete());
    EXPECT_FALSE(ctx.resume());
    EXPECT_FALSE(ctx.set_timeout(milliseconds(5)));
    EXPECT_FALSE(ctx.on_error([](const async_event&) {}));
    // Released with its exchange: attributes (like listeners) were let go at detach, so a
    // late set_attribute is dropped instead of pinning a value (maybe a handle to this very
    // state) for as long as the handle lives.
    ctx.set_attribute("k", 1);
    EXPECT_EQ(ctx.attribute<int>("k"), std::nullopt);
}

TEST_F(fixture, attributes_are_shared_and_typed) {
    async_context ctx(make());
    async_context copy = ctx;
    copy.set_attribute("r", std::string("body"));
    EXPECT_EQ(ctx.attribute<std::string>("r"), "body");
    EXPECT_EQ(ctx.attribute<int>("r"), std::nullopt) << "a wrong type reads as absent";
    EXPECT_EQ(ctx.attribute<std::string>("missing"), std::nullopt);
}

} // namespace
} // namespace sluice::detail
