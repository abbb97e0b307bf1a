// Misuse torture (issue 6, "Build"): thousands of exchanges on every backend × dispatch mode,
// each driven by a random plan — complete, complete(r), resume, set_timeout, timeout status,
// listeners added from other threads, handlers that throw before or after an accepted call,
// clients that reset, close or half-close at random moments, and server stops from two
// threads at once — in random interleavings across the loop, worker and foreign threads.
//
// Checked for every exchange: at most one terminal transition (exactly one unless a resumed
// dispatch simply returned), on_complete exactly once, no call accepted after on_complete,
// every listener registered fires as promised, never two dispatches at once; for every
// response: it carries its own request's id (nothing written to another connection), or it
// is a 500/503/504 or a clean close; after each round: every exchange, connection and
// descriptor freed.
//
// The seed is printed; SLUICE_TORTURE_SEED=<n> replays it (interleavings still vary), and
// SLUICE_TORTURE_EXCHANGES=<n> sets the exchanges per backend × dispatch pair.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/delay_pool.h"
#include "support/open_fds.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr int rounds = 4;         // odd rounds end with a server stop in the middle
constexpr int client_threads = 6; // concurrent connections
constexpr int racer_threads = 4;  // the "other threads" calling into async contexts
constexpr int max_dispatches = 4; // resume rounds per exchange before it answers
constexpr int max_rearms = 2;     // on_timeout listeners re-arming one exchange
constexpr int failures_shown = 20;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

std::uint64_t torture_seed() {
    static const std::uint64_t seed = [] {
        const std::uint64_t s = env_or("SLUICE_TORTURE_SEED", std::random_device{}());
        std::printf("async torture: seed %llu (replay with SLUICE_TORTURE_SEED=%llu)\n",
                    static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
        std::fflush(stdout);
        return s;
    }();
    return seed;
}

int code_of(const std::error_code& e) noexcept {
    return e ? e.value() : 0;
}

/// What happened to one exchange, from whichever thread saw it.
struct record {
    std::atomic<int> dispatches{0};
    std::atomic<int> active{0};
    std::atomic<bool> overlapped{false};
    std::atomic<bool> async_started{false};
    std::atomic<int> complete_wins{0};
    std::atomic<int> resume_wins{0};
    std::atomic<int> late_wins{0}; // accepted although on_complete had already run
    std::atomic<int> sync_finishes{0};
    std::atomic<int> on_timeout{0};
    std::atomic<int> on_error{0};
    std::atomic<int> on_complete{0};
    std::atomic<int> error_code{0};
    std::atomic<int> complete_code{0};
    std::atomic<int> rearms{0};
    std::atomic<int> extra_error_added{0};
    std::atomic<int> extra_error_fired{0};
    std::atomic<int> extra_complete_added{0};
    std::atomic<int> extra_complete_fired{0};
};

/// One round: a server, its records, and what went wrong.
struct round_state {
    explicit round_state(std::size_t n, std::uint64_t s) : records(n), seed(s) {}
    std::vector<record> records;
    std::uint64_t seed;
    std::atomic<std::size_t> next_id{0};
    std::atomic<bool> stopping{false};
    std::mutex mu;
    std::vector<std::string> failures;

    void fail(std::string what) {
        std::lock_guard lock(mu);
        failures.push_back(std::move(what));
    }
};

std::string tag(std::size_t id, const char* who) {
    return "id=" + std::to_string(id) + ";" + who;
}

std::mt19937_64 rng_for(std::uint64_t seed, std::size_t id, int salt) {
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                      static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(salt)};
    return std::mt19937_64(seq);
}

class async_torture_test : public backend_test {
protected:
    void run_round(int round, std::size_t exchanges, std::uint64_t seed);
    void handle(exchange& ex, const std::shared_ptr<round_state>& rs);
    void go_async(exchange& ex, record& rec, std::size_t id, std::mt19937_64& rng,
                  const std::shared_ptr<round_state>& rs);
    void schedule_racer(async_context ctx, record& rec, std::size_t id, std::mt19937_64& rng,
                        const std::shared_ptr<round_state>& rs);
    void client(int index, const std::shared_ptr<round_state>& rs);
    void check_records(const round_state& rs, int round);

    std::unique_ptr<delay_pool> racers_;
    std::uint64_t totals_[6] = {}; // dispatched, async, completed, timed out, errors, resumed
};

/// Makes a complete or resume call and records whether it was accepted, and whether that
/// happened although on_complete had already run before the call.
template <class Call>
void attempt(record& rec, bool completes, Call&& call) {
    const bool ended_before = rec.on_complete.load() != 0;
    if (!call()) {
        return;
    }
    if (ended_before) {
        ++rec.late_wins;
    }
    ++(completes ? rec.complete_wins : rec.resume_wins);
}

void async_torture_test::handle(exchange& ex, const std::shared_ptr<round_state>& rs) {
    const std::size_t id = std::stoul(std::string(ex.request().path_param("id").value_or("0")));
    record& rec = rs->records.at(id);
    if (rec.active.fetch_add(1) != 0) {
        rec.overlapped = true;
    }
    struct leave {
        record& r;
        ~leave() { r.active.fetch_sub(1); }
    } guard{rec};
    const int dispatch = ++rec.dispatches;
    auto rng = rng_for(rs->seed, id, dispatch);
    const auto p = rng() % 100;
    if (dispatch == 1 && p < 8) {
        ex.response().text(tag(id, "sync"));
        return;
    }
    if (dispatch == 1 && p < 11) {
        throw std::runtime_error("sync handler throws");
    }
    if (dispatch > 1 && (dispatch >= max_dispatches || p < 40)) {
        if (p % 10 == 0) {
            throw std::runtime_error("resumed handler throws");
        }
        ex.response().text(tag(id, "resumed"));
        ++rec.sync_finishes;
        return;
    }
    go_async(ex, rec, id, rng, rs);
}

void async_torture_test::go_async(exchange& ex, record& rec, std::size_t id, std::mt19937_64& rng,
                                  const std::shared_ptr<round_state>& rs) {
    ex.response().status(200).text(tag(id, "handler"));
    auto ctx = ex.start_async(milliseconds(5 + rng() % 150));
    if (!rec.async_started.exchange(true)) {
        ctx.on_error([&rec](const async_event& ev) {
            rec.error_code = code_of(ev.error);
            ++rec.on_error;
        });
        ctx.on_complete([&rec](const async_event& ev) {
            rec.complete_code = code_of(ev.error);
            ++rec.on_complete;
        });
        ctx.on_timeout([&rec, id, seed = rs->seed](const async_event& ev) {
            const int n = ++rec.on_timeout;
            auto r = rng_for(seed, id, 100 + n);
            auto c = ev.context;
            switch (r() % 6) {
            case 0:
                attempt(rec, true, [&] { return c.complete(response(200).text(tag(id, "on_timeout"))); });
                break;
            case 1:
                attempt(rec, true, [&] { return c.complete(); });
                break;
            case 2:
                attempt(rec, false, [&] { return c.resume(); });
                break;
            case 3:
            case 4:
                if (rec.rearms.fetch_add(1) < max_rearms) {
                    c.set_timeout(milliseconds(1 + r() % 100));
                }
                if (r() % 3 == 0) {
                    attempt(rec, true,
                            [&] { return c.complete(response(200).text(tag(id, "rearm+complete"))); });
                }
                break;
            default:
                break; // let the timeout end it
            }
        });
    }
    if (rng() % 4 == 0) {
        ctx.set_timeout_status(504);
    }
    for (auto k = rng() % 4; k > 0; --k) {
        schedule_racer(ctx, rec, id, rng, rs);
    }
    switch (rng() % 12) {
    case 0:
        attempt(rec, true, [&] { return ctx.complete(response(200).text(tag(id, "in-handler"))); });
        if (rng() % 2 == 0) {
            throw std::runtime_error("throws after complete(r)");
        }
        break;
    case 1:
        attempt(rec, true, [&] { return ctx.complete(); });
        break;
    case 2:
        attempt(rec, false, [&] { return ctx.resume(); });
        if (rng() % 2 == 0) {
            throw std::runtime_error("throws after resume()");
        }
        break;
    case 3:
        throw std::runtime_error("throws after start_async");
    case 4:
        ctx.set_timeout(milliseconds(1 + rng() % 50));
        break;
    case 5:
    case 6:
        // Stay in the handler a moment: racers land in the deferral window.
        std::this_thread::sleep_for(microseconds(rng() % 1500));
        break;
    default:
        break;
    }
}

void async_torture_test::schedule_racer(async_context ctx, record& rec, std::size_t id, std::mt19937_64& rng,
                                        const std::shared_ptr<round_state>& rs) {
    const auto op = rng() % 10;
    const auto delay = microseconds(rng() % 4000);
    racers_->run_after(rng(), delay, [ctx = std::move(ctx), &rec, id, op, rs]() mutable {
        switch (op) {
        case 0:
        case 1:
            attempt(rec, true, [&] { return ctx.complete(response(200).text(tag(id, "racer"))); });
            break;
        case 2:
            attempt(rec, true, [&] { return ctx.complete(); });
            break;
        case 3:
        case 4:
            attempt(rec, false, [&] { return ctx.resume(); });
            break;
        case 5:
            ctx.set_timeout(milliseconds(1 + id % 80));
            break;
        case 6:
            ctx.set_timeout_status(503 + static_cast<int>(id % 2));
            break;
        case 7:
            if (ctx.on_error([&rec](const async_event&) { ++rec.extra_error_fired; })) {
                ++rec.extra_error_added;
            }
            break;
        case 8:
            if (ctx.on_complete([&rec](const async_event&) { ++rec.extra_complete_fired; })) {
                ++rec.extra_complete_added;
            }
            break;
        default:
            ctx.set_attribute("seen", ctx.is_done());
            break;
        }
    });
}

void async_torture_test::client(int index, const std::shared_ptr<round_state>& rs) {
    auto rng = rng_for(rs->seed, 1'000'000 + static_cast<std::size_t>(index), 0);
    const std::size_t total = rs->records.size();
    while (!rs->stopping.load()) {
        test_client c(srv().port(), milliseconds(10'000));
        if (!c.connected()) {
            if (!rs->stopping.load()) {
                rs->fail("client " + std::to_string(index) + ": connect failed: " + c.error());
            }
            return;
        }
        for (auto n = 1 + rng() % 4; n > 0; --n) {
            const std::size_t first = rs->next_id.fetch_add(1);
            if (first >= total) {
                return;
            }
            std::vector<std::size_t> ids{first};
            std::string bytes = get_request("/t/" + std::to_string(first));
            if (rng() % 5 == 0) { // pipeline a second request behind the first
                const std::size_t second = rs->next_id.fetch_add(1);
                if (second < total) {
                    ids.push_back(second);
                    bytes += get_request("/t/" + std::to_string(second));
                }
            }
            if (!c.send(bytes)) {
                if (!rs->stopping.load()) {
                    rs->fail("id " + std::to_string(first) + ": send failed: " + c.error());
                }
                return;
            }
            if (rng() % 8 == 0) { // the client leaves mid-exchange
                std::this_thread::sleep_for(microseconds(rng() % 20'000));
                switch (rng() % 3) {
                case 0:
                    c.close_abortive();
                    break;
                case 1:
                    c.close_clean();
                    break;
                default:
                    c.shutdown_write();
                    (void)c.wait_closed();
                    break;
                }
                break;
            }
            bool closing = false;
            for (const std::size_t id : ids) {
                auto r = c.read_response();
                if (!r) {
                    if (!rs->stopping.load()) {
                        rs->fail("id " + std::to_string(id) + ": no response: " + c.error());
                    }
                    return;
                }
                const std::string want = "id=" + std::to_string(id) + ";";
                const bool own = r->body.compare(0, want.size(), want) == 0;
                const bool foreign = !own && r->body.compare(0, 3, "id=") == 0;
                if (foreign || (r->status == 200 && !own) ||
                    (r->status != 200 && r->status != 500 && r->status != 503 && r->status != 504)) {
                    rs->fail("id " + std::to_string(id) + ": got " + std::to_string(r->status) + " \"" +
                             printable(r->body, 80) + "\"");
                    return;
                }
                closing = closing || r->header("Connection") == "close";
            }
            if (closing) {
                break;
            }
        }
    }
}

void async_torture_test::check_records(const round_state& rs, int round) {
    int shown = 0;
    auto fail = [&](std::size_t id, const std::string& what) {
        if (shown++ < failures_shown) {
            ADD_FAILURE() << "round " << round << ", id " << id << ": " << what
                          << " (SLUICE_TORTURE_SEED=" << torture_seed() << ")";
        }
    };
    for (std::size_t id = 0; id < rs.records.size(); ++id) {
        const record& r = rs.records[id];
        if (r.dispatches.load() == 0) {
            continue; // never reached a handler: the client left or the server stopped first
        }
        ++totals_[0];
        if (r.overlapped.load()) {
            fail(id, "two dispatches ran at once");
        }
        if (!r.async_started.load()) {
            continue;
        }
        ++totals_[1];
        const int completes = r.complete_wins.load();
        const int errors = r.on_error.load();
        const bool expired = r.complete_code.load() == static_cast<int>(exchange_errc::timed_out) &&
                             completes == 0 && errors == 0;
        const int terminal = completes + errors + (expired ? 1 : 0);
        totals_[2] += static_cast<std::uint64_t>(completes);
        totals_[3] += expired ? 1 : 0;
        totals_[4] += static_cast<std::uint64_t>(errors);
        totals_[5] += static_cast<std::uint64_t>(r.resume_wins.load());
        const std::string counts =
            "complete wins " + std::to_string(completes) + ", on_error " + std::to_string(errors) +
            ", expired " + std::to_string(expired) + ", on_complete " + std::to_string(r.on_complete.load()) +
            " (error " + std::to_string(r.complete_code.load()) + "), dispatches " +
            std::to_string(r.dispatches.load()) + ", resumes " + std::to_string(r.resume_wins.load());
        if (r.on_complete.load() != 1) {
            fail(id, "on_complete did not fire exactly once: " + counts);
        }
        if (terminal > 1 || (terminal == 0 && r.sync_finishes.load() == 0)) {
            fail(id, "not exactly one terminal transition: " + counts);
        }
        if (r.late_wins.load() != 0) {
            fail(id, "a call was accepted after on_complete: " + counts);
        }
        if (errors == 1 && r.error_code.load() != r.complete_code.load()) {
            fail(id, "on_error and on_complete disagree: " + std::to_string(r.error_code.load()) + " vs " +
                         std::to_string(r.complete_code.load()));
        }
        if (r.dispatches.load() > 1 + r.resume_wins.load()) {
            fail(id, "more dispatches than accepted resumes: " + counts);
        }
        if (r.extra_complete_fired.load() != r.extra_complete_added.load()) {
            fail(id, "an on_complete listener added from another thread fired " +
                         std::to_string(r.extra_complete_fired.load()) + " times for " +
                         std::to_string(r.extra_complete_added.load()));
        }
        if (r.extra_error_fired.load() != (errors == 1 ? r.extra_error_added.load() : 0)) {
            fail(id, "on_error listeners added from another thread: " +
                         std::to_string(r.extra_error_added.load()) + " added, " +
                         std::to_string(r.extra_error_fired.load()) + " fired; " + counts);
        }
    }
}

void async_torture_test::run_round(int round, std::size_t exchanges, std::uint64_t seed) {
    const std::size_t fds_before = open_fds();
    auto rs = std::make_shared<round_state>(exchanges, seed);
    server_ = make_server(); // TLS on the {tls} rows, as in SetUp()
    server_->config().io_threads = 2;
    server_->route("GET", "/t/{id}", [this, rs](exchange& ex) { handle(ex, rs); });
    server_->start();
    auto rng = rng_for(seed, 0, -1);
    std::vector<std::thread> clients;
    for (int i = 0; i < client_threads; ++i) {
        clients.emplace_back([this, i, rs] { client(i, rs); });
    }
    std::vector<std::thread> stoppers;
    if (round % 2 == 1) {
        // Two threads stop the server at once, while clients and racers are busy.
        const auto after = milliseconds(20 + rng() % 300);
        for (int i = 0; i < 2; ++i) {
            stoppers.emplace_back([this, rs, after, i] {
                std::this_thread::sleep_for(after + microseconds(i * 300));
                rs->stopping = true;
                server_->stop();
            });
        }
    }
    for (auto& t : clients) {
        t.join();
    }
    for (auto& t : stoppers) {
        t.join();
    }
    EXPECT_TRUE(racers_->wait_idle(milliseconds(10'000))) << "racer threads stuck";
    if (round % 2 == 0) {
        // Every client has its answer (or left): every exchange must end without a stop.
        EXPECT_TRUE(srv().wait_exchanges_freed(milliseconds(10'000)))
            << "round " << round << ": exchanges_live = " << srv().stats().exchanges_live;
        EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }, milliseconds(10'000)))
            << "round " << round << ": connections_open = " << srv().stats().connections_open;
    }
    srv().stop();
    EXPECT_EQ(srv().stats().exchanges_live, 0u) << "round " << round;
    EXPECT_EQ(srv().stats().exchanges_suspended, 0u) << "round " << round;
    EXPECT_TRUE(racers_->wait_idle(milliseconds(10'000)));
    {
        std::lock_guard lock(rs->mu);
        for (std::size_t i = 0; i < rs->failures.size() && i < failures_shown; ++i) {
            ADD_FAILURE() << "round " << round << ": " << rs->failures[i]
                          << " (SLUICE_TORTURE_SEED=" << torture_seed() << ")";
        }
    }
    check_records(*rs, round);
    server_.reset();
    EXPECT_TRUE(wait_until([&] { return open_fds() <= fds_before; }, milliseconds(10'000)))
        << "round " << round << ": descriptors leaked: " << open_fds() << " open, " << fds_before
        << " before";
}

TEST_P(async_torture_test, random_misuse_from_many_threads) {
    const std::uint64_t base = torture_seed();
    const std::size_t exchanges = env_or("SLUICE_TORTURE_EXCHANGES", 500);
    const std::uint64_t seed =
        base ^
        std::hash<std::string>{}(backend_param_name(::testing::TestParamInfo<backend_param>(GetParam(), 0)));
    racers_ = std::make_unique<delay_pool>(racer_threads);
    const auto from = test_clock::now();
    for (int round = 0; round < rounds && !HasFailure(); ++round) {
        run_round(round, exchanges / rounds, seed + static_cast<std::uint64_t>(round));
    }
    racers_.reset();
    std::printf(
        "async torture %s: %llu dispatched, %llu async: %llu completed, %llu timed out, %llu errors, "
        "%llu resumes; %lld ms\n",
        backend_param_name(::testing::TestParamInfo<backend_param>(GetParam(), 0)).c_str(),
        static_cast<unsigned long long>(totals_[0]), static_cast<unsigned long long>(totals_[1]),
        static_cast<unsigned long long>(totals_[2]), static_cast<unsigned long long>(totals_[3]),
        static_cast<unsigned long long>(totals_[4]), static_cast<unsigned long long>(totals_[5]),
        static_cast<long long>(std::chrono::duration_cast<milliseconds>(test_clock::now() - from).count()));
}

SLUICE_BACKEND_SUITE(async_torture_test);

} // namespace
} // namespace sluice::test
