// An upstream's address set across refreshes (upstream_state::apply): what stays, what is
// retired, what a failed lookup keeps, and readers on other threads while the set changes size.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sluice/client.h>

#include "client/upstream.h"
#include "support/fake_dns.h"

namespace sluice::detail {
namespace {

using namespace std::chrono_literals;
using test::fake_dns;

std::uint16_t port_of(const upstream_address& a) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(a.addr).sin_port);
}

std::vector<std::uint16_t> ports(const upstream_state& s) {
    std::vector<std::uint16_t> out;
    for (const auto& a : *s.current()) {
        out.push_back(port_of(*a));
    }
    return out;
}

// One refresh round, as the resolver thread does it.
bool refresh(upstream_state& s) {
    std::vector<std::optional<lookup_result>> results(s.hosts().size());
    for (std::size_t i = 0; i < s.hosts().size(); ++i) {
        if (!s.hosts()[i].literal) {
            results[i] = s.lookup(s.hosts()[i]);
        }
    }
    return s.apply(results);
}

TEST(upstream_refresh, a_refresh_replaces_the_set_and_keeps_the_marks_of_addresses_that_stay) {
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{"127.0.0.1:1001", "127.0.0.1:1002"});
    upstream_state s({"svc.test:80"}, {.resolve = dns->function()});
    ASSERT_EQ(ports(s), (std::vector<std::uint16_t>{1001, 1002}));
    const auto before = s.current();
    (*before)[1]->failed_until_ns.store(12345);
    const auto generation = s.generation();

    dns->answer({"127.0.0.1:1002", "127.0.0.1:1003", "127.0.0.1:1004"});
    EXPECT_TRUE(refresh(s));
    EXPECT_EQ(ports(s), (std::vector<std::uint16_t>{1002, 1003, 1004}));
    EXPECT_GT(s.generation(), generation);
    const auto after = s.current();
    EXPECT_EQ((*after)[0], (*before)[1]); // the same object: its failure mark carried over
    EXPECT_EQ((*after)[0]->failed_until_ns.load(), 12345);
    EXPECT_FALSE((*after)[0]->retired.load());
    EXPECT_TRUE((*before)[0]->retired.load()); // gone: its connections are not reused
    // The old set is unchanged for whoever still holds it.
    EXPECT_EQ(before->size(), 2u);

    // The same answer again publishes nothing.
    const auto g2 = s.generation();
    EXPECT_FALSE(refresh(s));
    EXPECT_EQ(s.generation(), g2);
}

TEST(upstream_refresh, a_failed_lookup_keeps_the_last_addresses) {
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{"127.0.0.1:1001"});
    upstream_state s({"svc.test:80", "127.0.0.1:2000"}, {.resolve = dns->function()});
    const auto generation = s.generation();
    dns->fail(true);
    EXPECT_FALSE(refresh(s));
    EXPECT_EQ(ports(s), (std::vector<std::uint16_t>{1001, 2000}));
    EXPECT_EQ(s.generation(), generation);
    dns->fail(false);
    dns->answer({}); // no address at all is a failure too: never an empty set
    EXPECT_FALSE(refresh(s));
    EXPECT_EQ(ports(s), (std::vector<std::uint16_t>{1001, 2000}));
}

TEST(upstream_refresh, a_resolve_function_must_return_literals) {
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{"other.test:80"});
    EXPECT_THROW(upstream_state({"svc.test:80"}, {.resolve = dns->function()}), std::invalid_argument);
    auto bad_port = std::make_shared<fake_dns>(std::vector<std::string>{"127.0.0.1"});
    EXPECT_THROW(upstream_state({"svc.test:80"}, {.resolve = bad_port->function()}), std::invalid_argument);
}

TEST(upstream_refresh, literals_are_never_looked_up_again) {
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{"127.0.0.1:1001"});
    upstream_state literal({"127.0.0.1:80", "[::1]:80", "https://127.0.0.1"}, {.resolve = dns->function()});
    EXPECT_EQ(dns->lookups(), 0);
    EXPECT_FALSE(literal.refreshes());
    EXPECT_FALSE(refresh(literal));
    EXPECT_EQ(dns->lookups(), 0);

    upstream_state named({"svc.test:80"}, {.resolve = dns->function()});
    EXPECT_TRUE(named.refreshes());
    upstream_state never({"svc.test:80"}, {.resolve_interval = 0ms, .resolve = dns->function()});
    EXPECT_FALSE(never.refreshes());
}

TEST(upstream_refresh, localhost_resolves_at_startup_with_the_system_resolver) {
    const upstream_state s({"localhost:8080"}, {});
    EXPECT_FALSE(s.hosts()[0].literal);
    EXPECT_TRUE(s.refreshes()); // 30 s by default
    EXPECT_EQ(upstream_options{}.resolve_interval, 30000ms);
    ASSERT_EQ(s.current()->size(), 1u);
    EXPECT_EQ(port_of(*s.current()->front()), 8080);
}

// The pools' reading pattern (client_pool::addresses / pick_address) on several threads while
// a refresher swaps sets of 1 to 4 addresses: every index is taken in the snapshot it came
// from, so none is out of range (ASan) and nothing races (TSan).
TEST(upstream_refresh, readers_on_other_threads_while_the_set_grows_and_shrinks) {
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{"127.0.0.1:1001"});
    upstream_state s({"svc.test:80"}, {.resolve = dns->function()});
    std::atomic<bool> stop{false};
    std::atomic<long> picks{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 3; ++r) {
        readers.emplace_back([&] {
            std::shared_ptr<const address_set> set;
            std::uint64_t seen = ~std::uint64_t{0};
            while (!stop.load()) {
                const std::uint64_t g = s.generation();
                if (g != seen) {
                    set = s.current();
                    seen = g;
                }
                const std::size_t k = s.next.fetch_add(1) % set->size();
                const auto& a = (*set)[k];
                ASSERT_TRUE(a != nullptr);
                const std::uint16_t p = port_of(*a);
                ASSERT_TRUE(p >= 1001 && p <= 1004) << p;
                (void)a->failed_until_ns.load();
                ++picks;
            }
        });
    }
    // Until the readers have picked many times across many sets (threads start late on a busy
    // machine), within a deadline.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (int round = 0; (round < 2000 || picks.load() < 20000) && std::chrono::steady_clock::now() < deadline;
         ++round) {
        std::vector<std::string> answer;
        for (int i = 0; i <= round % 4; ++i) {
            answer.push_back("127.0.0.1:" + std::to_string(1001 + (round + i) % 4));
        }
        dns->answer(answer);
        refresh(s);
    }
    stop = true;
    for (auto& t : readers) {
        t.join();
    }
    EXPECT_GE(picks.load(), 20000);
}

} // namespace
} // namespace sluice::detail
