// A resolve function for sluice::upstream_options::resolve that a test steers: what a name
// resolves to, whether lookups fail, and whether they hang (a DNS server that does not answer),
// without touching /etc/hosts.
//
//   auto dns = std::make_shared<fake_dns>(std::vector<std::string>{"127.0.0.1:" + port_a});
//   sluice::upstream up({"svc.test:80"}, {.resolve_interval = 20ms, .resolve = dns->function()});
//   dns->answer({"127.0.0.1:" + port_b}); // the next refresh moves the calls
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "support/deadline.h"

namespace sluice::test {

class fake_dns : public std::enable_shared_from_this<fake_dns> {
public:
    explicit fake_dns(std::vector<std::string> answer) : answer_(std::move(answer)) {}

    /// The resolve function; it holds this object (a test sees it released through use_count).
    std::function<std::vector<std::string>(std::string_view, std::uint16_t)> function();

    /// What every later lookup returns ("ip:port" literals).
    void answer(std::vector<std::string> a);
    /// Later lookups throw (an NXDOMAIN) until set back.
    void fail(bool f);
    /// Later lookups wait until unblocked (at most `hang_limit`, then they fail).
    void block(bool b);
    /// Lookups made so far (failed ones included).
    int lookups() const;
    /// Whether a lookup is waiting in block() now.
    bool blocked_now() const;

    static constexpr std::chrono::milliseconds hang_limit{10000};

private:
    std::vector<std::string> lookup();

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::string> answer_;
    bool fail_ = false;
    bool block_ = false;
    bool blocked_now_ = false;
    int lookups_ = 0;
};

} // namespace sluice::test
