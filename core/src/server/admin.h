// The admin listener (admin.listen): /metrics, /healthz and /readyz on an address of its own,
// served by a small sluice::server of its own (one loop, inline dispatch), so that a scrape
// or a probe never queues behind traffic and the public port never exposes them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sluice/config.h>
#include <sluice/log.h>

namespace sluice {
class server;
}

namespace sluice::detail {

class admin_endpoint {
public:
    struct sources {
        std::function<std::string()> metrics;   ///< the /metrics text
        std::function<std::string()> not_ready; ///< "" when ready, else why not
    };

    /// Derives the admin server's configuration from the main one.
    admin_endpoint(const config& main, const logger& log, sources src);
    ~admin_endpoint();
    admin_endpoint(const admin_endpoint&) = delete;
    admin_endpoint& operator=(const admin_endpoint&) = delete;

    /// Binds (or accepts on `inherited`, checked and owned from here on) and serves; throws
    /// startup_error naming admin.listen.
    void start(std::vector<int> inherited = {});
    void stop() noexcept;
    void stop_after_handover() noexcept;
    std::vector<int> listening_fds() const;
    std::uint16_t port() const noexcept;

private:
    const logger& log_;
    std::string listen_;
    std::unique_ptr<sluice::server> srv_;
    sources src_;
};

} // namespace sluice::detail
