// Both ends of a restart over `handover_socket` (the protocol: handover.h).
//
// handover_endpoint (the running server): listens on the Unix socket on a thread of its own,
// answers one new process at a time, and once one has acknowledged, calls on_handed_over()
// (the server then drains and stops) and answers no one else: a second new process that
// raced the first finds the connection closed and fails to bind, with a message that says so.
//
// take_over() (the new server, in start()): connects, receives the listeners, and keeps the
// connection open until the listeners serve here (acknowledge()), so that a new process that
// fails to start leaves the old one serving.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sluice/log.h>

#include "server/handover.h"

namespace sluice::detail {

/// How long each side waits for the other at each step.
inline constexpr std::chrono::milliseconds handover_timeout{10'000};

class handover_endpoint {
public:
    using provider = std::function<std::vector<handed_fd>()>; // descriptors stay the server's
    handover_endpoint(std::string path, const logger& log, provider fds,
                      std::function<void()> on_handed_over);
    ~handover_endpoint();
    handover_endpoint(const handover_endpoint&) = delete;
    handover_endpoint& operator=(const handover_endpoint&) = delete;

    /// Binds the path (replacing, atomically, a socket an older server left there) and starts
    /// answering. Throws startup_error("handover_socket").
    void start();
    /// Stops answering and joins; removes the path if it is still ours. Not from on_handed_over.
    void stop() noexcept;

private:
    void run() noexcept;
    bool serve_one(int conn) noexcept;

    std::string path_;
    const logger& log_;
    provider fds_;
    std::function<void()> on_handed_over_;
    int listen_fd_ = -1;
    int wake_fd_ = -1;
    ino_t path_inode_ = 0;
    dev_t path_device_ = 0;
    std::thread thread_;
};

struct takeover {
    int sock = -1;
    std::vector<handed_fd> fds;

    takeover() = default;
    takeover(takeover&& o) noexcept;
    takeover& operator=(takeover&& o) noexcept;
    ~takeover(); ///< closes the connection (without acknowledging) and any fds still held

    /// The listeners serve here: tells the old server, which stops. Logs a failure (the old
    /// server then keeps its copies open and both serve until it is stopped).
    void acknowledge(const logger& log) noexcept;
};

/// Connects to the server at `path` and receives its listeners. std::nullopt (logged) when no
/// server answers there (no socket, nobody listening, or it closed before sending: the server
/// binds as on a first start). Throws startup_error("handover_socket") for a peer that answers
/// wrongly or not in time.
std::optional<takeover> take_over(const std::string& path, const logger& log);

} // namespace sluice::detail
