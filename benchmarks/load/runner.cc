#include "runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "request.h"

namespace sluice::load {

using clock_type = std::chrono::steady_clock;

error_kind classify(const result<client_response>& r) noexcept {
    if (r) {
        return r->status >= 200 && r->status < 300 ? error_kind::none : error_kind::non_2xx;
    }
    const auto e = r.error();
    if (e.category() != client_category()) {
        return error_kind::other;
    }
    switch (static_cast<client_errc>(e.value())) {
    case client_errc::refused:
    case client_errc::connect_timed_out:
        return error_kind::connect;
    case client_errc::response_timed_out:
    case client_errc::acquire_timed_out:
        return error_kind::timeout;
    case client_errc::reset:
        return error_kind::reset;
    default:
        return error_kind::other;
    }
}

namespace {

client_options client_options_for(const load_options& o) {
    client_options c;
    // One connection per user (a JMeter thread with its own HttpClient connection): the pool
    // never makes a user wait for another's connection.
    c.max_connections = o.users;
    c.max_pending = o.users;
    c.acquire_timeout = o.timeout;
    c.connect_timeout = o.connect_timeout;
    c.response_timeout = o.timeout;
    c.idle_timeout = std::chrono::hours(1);
    c.max_requests_per_connection = o.keep_alive ? 0 : 1;
    c.tls.ca_file = o.ca_file;
    c.tls.verify = o.insecure ? tls_verify::none : tls_verify::peer;
    return c;
}

// Everything the calls' callbacks touch. They all run on the client's own loop thread, so the
// samples need no lock; the main thread reads only the atomics until the client is destroyed
// (which joins that thread), and the rest after. send() runs on both threads (the main thread
// starts the users, the loop thread sends each next request): send_mu makes "not stopping,
// so call the client" one step, so no send can overlap the client's destruction.
struct state {
    const load_options& opts;
    const client_request& request;
    std::size_t request_bytes = 0;
    clock_type::time_point t0;
    std::vector<std::uint64_t> left; // loops left per user
    std::vector<sample> samples;
    std::uint64_t bytes_received = 0;
    std::atomic<bool> stopping{false};
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> errors{0};
    std::atomic<std::uint64_t> in_flight{0};
    std::atomic<std::size_t> users_done{0};
    std::mutex send_mu;
    client* api = nullptr; // set before the first send, never changed while calls run

    state(const load_options& o, const client_request& r) : opts(o), request(r) {}

    void stop() {
        std::lock_guard lock(send_mu);
        stopping.store(true);
    }

    void send(std::size_t user) {
        std::lock_guard lock(send_mu);
        if (stopping.load(std::memory_order_relaxed)) {
            users_done.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        client_request r;
        r.method = request.method;
        r.target = request.target;
        r.headers = request.headers;
        r.body_view = request.body; // borrowed: the request outlives the client
        if (r.body_view.data() == nullptr) {
            r.body_view = {};
        }
        const auto started = clock_type::now();
        in_flight.fetch_add(1, std::memory_order_relaxed);
        api->send(executor{}, std::move(r), [this, user, started](result<client_response> res) {
            in_flight.fetch_sub(1, std::memory_order_relaxed);
            // A call that ends after the end of the run is not a sample (wrk drops them too): the
            // throughput is the completions within the duration, and cancelled calls are no error.
            if (stopping.load(std::memory_order_relaxed)) {
                users_done.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            const auto now = clock_type::now();
            sample s;
            s.latency_us = static_cast<std::uint32_t>(std::min<std::int64_t>(
                std::chrono::duration_cast<std::chrono::microseconds>(now - started).count(), UINT32_MAX));
            s.end_ms = static_cast<std::uint32_t>(
                std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count());
            s.error = classify(res);
            samples.push_back(s);
            if (res) {
                bytes_received += wire_size(*res);
            }
            completed.fetch_add(1, std::memory_order_relaxed);
            if (s.error != error_kind::none) {
                errors.fetch_add(1, std::memory_order_relaxed);
            }
            if (opts.loops != 0 && --left[user] == 0) {
                users_done.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            send(user);
        });
    }
};

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

} // namespace

run_result run(const load_options& o, const client_request& request, std::ostream* progress) {
    state st(o, request);
    st.request_bytes = wire_size(request, o.host);
    st.left.assign(o.users, o.loops);
    st.samples.reserve(std::min<std::uint64_t>(o.loops ? o.loops * o.users : o.users * 64, 1u << 24));
    auto api =
        std::make_unique<client>(upstream({(o.tls ? "https://" : "") + o.host}), client_options_for(o));
    st.api = api.get();

    st.t0 = clock_type::now();
    const auto deadline = o.duration_s > 0 ? st.t0 + std::chrono::duration_cast<clock_type::duration>(
                                                         std::chrono::duration<double>(o.duration_s))
                                           : clock_type::time_point::max();
    std::size_t started = 0;
    auto next_progress = st.t0 + std::chrono::seconds(1);
    std::uint64_t last_completed = 0;
    // The main thread paces the ramp-up and the progress line; send() is thread-safe and the
    // calls then run on the client's loop.
    for (;;) {
        const auto now = clock_type::now();
        while (started < o.users) {
            const double at = o.ramp_up_s * static_cast<double>(started) / static_cast<double>(o.users);
            if (seconds_since(st.t0) < at) {
                break;
            }
            st.send(started++);
        }
        if (now >= deadline || (started == o.users && st.users_done.load() == o.users)) {
            break;
        }
        if (progress != nullptr && now >= next_progress) {
            const auto done = st.completed.load();
            *progress << fmt::format("[{:6.1f}s] users {}/{}  in flight {}  done {}  {:.0f}/s  errors {}\n",
                                     seconds_since(st.t0), started, o.users, st.in_flight.load(), done,
                                     static_cast<double>(done - last_completed), st.errors.load())
                      << std::flush;
            last_completed = done;
            next_progress += std::chrono::seconds(1);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(started < o.users ? 1 : 20));
    }
    st.stop();
    const double elapsed =
        o.duration_s > 0 && clock_type::now() >= deadline ? o.duration_s : seconds_since(st.t0);
    // Destroying the client cancels what is still in flight and joins its loop thread: after
    // this, the samples are ours to read.
    api.reset();
    run_result r;
    r.elapsed_s = elapsed;
    r.bytes_received = st.bytes_received;
    r.bytes_sent = st.request_bytes * st.samples.size();
    r.samples = std::move(st.samples);
    return r;
}

} // namespace sluice::load
