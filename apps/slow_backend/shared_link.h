// A shared uplink of fixed bandwidth (S3's ~74 Mbit/s), through which every upload of the
// process passes at once.
//
// Why it paces the answer and not the reading: the core reads a request body whole before the
// handler runs (there is no streaming request-body API to pause), so the socket cannot be
// throttled from the app. Instead each upload's bytes become a flow on a simulated link that
// shares its bandwidth fairly among the flows in progress (as TCP flows on one bottleneck do),
// and the upload is answered when the link has carried its last byte. The client thus sees the
// latency of a shared thin link: 50 concurrent 74 KB uploads at 9.25 MB/s all finish after
// ~400 ms, which is the bufferbloat of S3. Waiting costs no thread: the exchanges are suspended
// and one loop timer (running only while flows exist) advances the link by the real elapsed
// time, so a late timer never speeds the link up.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <mutex>

#include <sluice/async_context.h>
#include <sluice/executor.h>
#include <sluice/response.h>

namespace slow_backend {

class shared_link {
public:
    /// bytes_per_second > 0.
    explicit shared_link(double bytes_per_second) : bytes_per_ms_(bytes_per_second / 1000.0) {}
    shared_link(const shared_link&) = delete;
    shared_link& operator=(const shared_link&) = delete;
    /// Every flow's exchange has ended before this (the server stops first).
    ~shared_link() = default;

    /// Sends `bytes` over the link, then completes ctx with `answer`. `on` is the caller's loop,
    /// which drives the link's timer if no flow is in progress. Thread-safe.
    void send(const sluice::executor& on, sluice::async_context ctx, std::uint64_t bytes,
              sluice::response answer);

    /// Flows in progress (for tests).
    std::size_t flows() const;

private:
    using clock = std::chrono::steady_clock;
    struct flow {
        sluice::async_context ctx;
        double left; // bytes not yet carried
        sluice::response answer;
    };

    void tick(const sluice::executor& on);

    static constexpr std::chrono::milliseconds tick_interval{1};

    const double bytes_per_ms_;
    mutable std::mutex mu_;
    std::list<flow> flows_;
    clock::time_point last_{};
    bool ticking_ = false;
};

} // namespace slow_backend
