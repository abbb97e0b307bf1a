// Clients that keep requesting while servers come and go (restart tests): each thread sends
// GET requests on a keep-alive connection (up to 20), reopens it after a Connection: close
// response, and records anything else (a refused connect, a reset, a close without a response,
// a status other than 200) as a failure.
//
//   steady_load load(port, "/who", 3);
//   ... restart the server ...
//   load.stop();
//   EXPECT_EQ(load.failures(), "");
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice::test {

class steady_load {
public:
    steady_load(std::uint16_t port, std::string target, int clients);
    ~steady_load(); ///< stops and joins
    steady_load(const steady_load&) = delete;
    steady_load& operator=(const steady_load&) = delete;

    /// Stops the clients after their request in progress, and joins them.
    void stop();
    std::uint64_t answered() const noexcept { return answered_.load(); }
    /// Responses whose body starts with `first` (servers that answer who they are).
    std::uint64_t answered_by(char first) const noexcept {
        return by_first_[static_cast<unsigned char>(first)].load();
    }
    /// One line per failure (at most a few hundred), "" when there was none.
    std::string failures() const;

private:
    void run();
    void fail(const std::string& why);

    std::uint16_t port_;
    std::string target_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> answered_{0};
    std::array<std::atomic<std::uint64_t>, 256> by_first_{};
    mutable std::mutex mu_;
    std::string failures_;
    std::vector<std::thread> threads_;
};

} // namespace sluice::test
