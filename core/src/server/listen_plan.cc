#include "server/listen_plan.h"

#include <unistd.h>

#include <string>

#include <sluice/error.h>

namespace sluice::detail {

int open_endpoint_listener(const listen_endpoint& e, const socket_address& addr, reuse_port reuse,
                           int backlog) {
    try {
        return open_listener(addr, reuse, backlog);
    } catch (const startup_error& err) {
        if (err.key() == e.key) {
            throw;
        }
        // open_listener() speaks of "listen"; an operator who set tls.listen must read that key.
        std::string why = err.what();
        const std::string prefix = err.key() + ": ";
        if (why.starts_with(prefix)) {
            why.erase(0, prefix.size());
        }
        throw startup_error(std::string(e.key), why);
    }
}

void close_adopted(listen_plan& plan) noexcept {
    for (auto& e : plan) {
        for (int fd : e.adopted) {
            ::close(fd);
        }
        e.adopted.clear();
    }
}

} // namespace sluice::detail
