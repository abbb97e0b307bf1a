// Resolving an upstream's addresses, once, on the thread that builds it (never on a loop).
#include "client/upstream.h"

#include <netdb.h>

#include <cstring>
#include <stdexcept>

#include <sluice/client.h>

namespace sluice::detail {

std::unique_ptr<upstream_address> resolve_address(const std::string& given) {
    // A URL's scheme says TLS or not and gives the default port; a bare "host:port" is http.
    std::string name = given;
    bool tls = false;
    const char* default_port = nullptr;
    if (const auto sep = given.find("://"); sep != std::string::npos) {
        const std::string scheme = given.substr(0, sep);
        if (scheme == "https") {
            tls = true;
            default_port = "443";
        } else if (scheme == "http") {
            default_port = "80";
        } else {
            throw std::invalid_argument("upstream address \"" + given + "\": scheme must be http or https");
        }
        name = given.substr(sep + 3);
        if (!name.empty() && name.back() == '/') {
            name.pop_back();
        }
        if (name.empty() || name.find('/') != std::string::npos) {
            throw std::invalid_argument("upstream address \"" + given + "\": expected scheme://host[:port]");
        }
    }
    std::string host;
    std::string port;
    if (!name.empty() && name.front() == '[') {
        const auto close = name.find(']');
        const bool port_follows =
            close != std::string::npos && close + 1 < name.size() && name[close + 1] == ':';
        const bool port_omitted =
            close != std::string::npos && close + 1 == name.size() && default_port != nullptr;
        if (!port_follows && !port_omitted) {
            throw std::invalid_argument("upstream address \"" + given + "\": expected [v6]:port");
        }
        host = name.substr(1, close - 1);
        port = port_omitted ? default_port : name.substr(close + 2);
    } else {
        const auto colon = name.rfind(':');
        if (colon == std::string::npos && default_port != nullptr && !name.empty()) {
            host = name;
            port = default_port;
        } else if (colon == std::string::npos || colon == 0) {
            throw std::invalid_argument("upstream address \"" + given + "\": expected host:port");
        } else {
            host = name.substr(0, colon);
            port = name.substr(colon + 1);
        }
    }
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
        std::stoul(port) == 0 || std::stoul(port) > 65535) {
        throw std::invalid_argument("upstream address \"" + given + "\": bad port");
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        throw std::invalid_argument("upstream address \"" + given + "\": " + ::gai_strerror(rc));
    }
    auto a = std::make_unique<upstream_address>();
    a->name = name;
    a->host = host;
    a->tls = tls;
    // The first result only: a name that resolves to several addresses is one upstream entry;
    // list the addresses explicitly for round robin between them.
    std::memcpy(&a->addr, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    ::freeaddrinfo(res);
    return a;
}

} // namespace sluice::detail

namespace sluice {

upstream::upstream(std::vector<std::string> addresses) : state_(std::make_shared<detail::upstream_state>()) {
    if (addresses.empty()) {
        throw std::invalid_argument("upstream: no address");
    }
    for (const auto& name : addresses) {
        state_->addresses.push_back(detail::resolve_address(name));
    }
    state_->names = std::move(addresses);
}

const std::vector<std::string>& upstream::names() const noexcept {
    return state_->names;
}

} // namespace sluice
