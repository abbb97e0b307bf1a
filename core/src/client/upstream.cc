// Parsing an upstream's addresses, looking them up, and publishing the resolved set.
#include "client/upstream.h"

#include <netdb.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace sluice::detail {

namespace {

struct host_port {
    std::string host;
    std::string port;
};

// "host:port" / "[v6]:port", or the host alone when default_port is given; nullopt if malformed.
std::optional<host_port> split_host_port(const std::string& name, const char* default_port) {
    if (!name.empty() && name.front() == '[') {
        const auto close = name.find(']');
        const bool port_follows =
            close != std::string::npos && close + 1 < name.size() && name[close + 1] == ':';
        const bool port_omitted =
            close != std::string::npos && close + 1 == name.size() && default_port != nullptr;
        if (!port_follows && !port_omitted) {
            return std::nullopt;
        }
        return host_port{name.substr(1, close - 1), port_omitted ? default_port : name.substr(close + 2)};
    }
    const auto colon = name.rfind(':');
    if (colon == std::string::npos && default_port != nullptr && !name.empty()) {
        return host_port{name, default_port};
    }
    if (colon == std::string::npos || colon == 0) {
        return std::nullopt;
    }
    return host_port{name.substr(0, colon), name.substr(colon + 1)};
}

std::optional<std::uint16_t> parse_port(const std::string& port) {
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) {
        return std::nullopt;
    }
    const unsigned long p = std::stoul(port);
    if (p == 0 || p > 65535) {
        return std::nullopt;
    }
    return static_cast<std::uint16_t>(p);
}

// getaddrinfo for one host and port; `flags` AI_NUMERICHOST accepts only a literal.
lookup_result getaddrinfo_first(const std::string& host, std::uint16_t port, int flags) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        return {std::nullopt, ::gai_strerror(rc)};
    }
    // The first result only: a name that resolves to several addresses is one upstream entry
    // (list the addresses explicitly, or give a resolve function, for round robin between them).
    std::pair<sockaddr_storage, socklen_t> a{};
    std::memcpy(&a.first, res->ai_addr, res->ai_addrlen);
    a.second = res->ai_addrlen;
    ::freeaddrinfo(res);
    return {std::vector{a}, {}};
}

bool same_address(const upstream_address& a, std::size_t host,
                  const std::pair<sockaddr_storage, socklen_t>& b) {
    return a.host == host && a.len == b.second && std::memcmp(&a.addr, &b.first, a.len) == 0;
}

} // namespace

upstream_host parse_upstream_host(const std::string& given) {
    // A URL's scheme says TLS or not and gives the default port; a bare "host:port" is http.
    std::string name = given;
    upstream_host h;
    const char* default_port = nullptr;
    if (const auto sep = given.find("://"); sep != std::string::npos) {
        const std::string scheme = given.substr(0, sep);
        if (scheme == "https") {
            h.tls = true;
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
    const auto hp = split_host_port(name, default_port);
    if (!hp) {
        throw std::invalid_argument(
            "upstream address \"" + given +
            "\": " + (!name.empty() && name.front() == '[' ? "expected [v6]:port" : "expected host:port"));
    }
    const auto port = parse_port(hp->port);
    if (!port) {
        throw std::invalid_argument("upstream address \"" + given + "\": bad port");
    }
    // The Host header: the authority as given, without the scheme's default port (RFC 9110
    // §4.2.3: "http://h:80" and "http://h" are one authority; nginx's $proxy_host does the same).
    const bool bracketed = !name.empty() && name.front() == '[';
    h.name = bracketed ? "[" + hp->host + "]" : hp->host;
    if (*port != (h.tls ? 443 : 80)) {
        h.name += ":" + std::to_string(*port);
    }
    h.host = hp->host;
    h.port = *port;
    h.literal = getaddrinfo_first(h.host, h.port, AI_NUMERICHOST).addresses.has_value();
    return h;
}

upstream_state::upstream_state(std::vector<std::string> names, upstream_options options)
    : names_(std::move(names)), options_(std::move(options)) {
    if (names_.empty()) {
        throw std::invalid_argument("upstream: no address");
    }
    auto set = std::make_shared<address_set>();
    for (const auto& given : names_) {
        hosts_.push_back(parse_upstream_host(given));
        const lookup_result r = lookup(hosts_.back());
        if (!r.addresses) {
            throw std::invalid_argument("upstream address \"" + given + "\": " + r.error);
        }
        for (const auto& a : *r.addresses) {
            auto e = std::make_shared<upstream_address>();
            e->host = hosts_.size() - 1;
            e->addr = a.first;
            e->len = a.second;
            set->push_back(std::move(e));
        }
    }
    set_ = std::move(set);
}

bool upstream_state::refreshes() const noexcept {
    if (options_.resolve_interval.count() <= 0) {
        return false;
    }
    for (const auto& h : hosts_) {
        if (!h.literal) {
            return true;
        }
    }
    return false;
}

std::shared_ptr<const address_set> upstream_state::current() const {
    std::lock_guard lock(mu_);
    return set_;
}

lookup_result upstream_state::lookup(const upstream_host& h) const {
    if (h.literal || !options_.resolve) {
        return getaddrinfo_first(h.host, h.port, h.literal ? AI_NUMERICHOST : 0);
    }
    std::vector<std::string> found;
    try {
        found = options_.resolve(h.host, h.port);
    } catch (const std::exception& e) {
        return {std::nullopt, e.what()};
    } catch (...) {
        return {std::nullopt, "the resolve function threw"};
    }
    if (found.empty()) {
        return {std::nullopt, "the resolve function found no address"};
    }
    std::vector<std::pair<sockaddr_storage, socklen_t>> out;
    for (const auto& f : found) {
        // Literals only: a resolve function that returned a name would make this thread (or
        // the constructor) look it up again, unbounded.
        const auto hp = split_host_port(f, nullptr);
        const auto port = hp ? parse_port(hp->port) : std::nullopt;
        lookup_result one = port ? getaddrinfo_first(hp->host, *port, AI_NUMERICHOST) : lookup_result{};
        if (!one.addresses) {
            return {std::nullopt, "the resolve function returned \"" + f + "\", not an ip:port literal"};
        }
        out.push_back(one.addresses->front());
    }
    return {std::move(out), {}};
}

bool upstream_state::apply(const std::vector<std::optional<lookup_result>>& results) {
    std::lock_guard lock(mu_);
    const address_set& old = *set_;
    auto next_set = std::make_shared<address_set>();
    for (std::size_t h = 0; h < hosts_.size(); ++h) {
        const bool looked_up = h < results.size() && results[h] && results[h]->addresses;
        if (!looked_up) {
            // A literal, or a failed lookup: the last good addresses stay (never an empty set).
            for (const auto& e : old) {
                if (e->host == h) {
                    next_set->push_back(e);
                }
            }
            continue;
        }
        for (const auto& a : *results[h]->addresses) {
            std::shared_ptr<upstream_address> keep;
            for (const auto& e : old) {
                if (same_address(*e, h, a)) {
                    keep = e; // the same object: its failure mark carries over
                    break;
                }
            }
            if (!keep) {
                keep = std::make_shared<upstream_address>();
                keep->host = h;
                keep->addr = a.first;
                keep->len = a.second;
            }
            if (std::find(next_set->begin(), next_set->end(), keep) == next_set->end()) {
                next_set->push_back(std::move(keep));
            }
        }
    }
    if (*next_set == old) {
        return false;
    }
    for (const auto& e : old) {
        if (std::find(next_set->begin(), next_set->end(), e) == next_set->end()) {
            e->retired.store(true, std::memory_order_relaxed);
        }
    }
    set_ = std::move(next_set);
    // After the store, under the lock: a pool that sees the new generation reads this set (or
    // a newer one) from current().
    generation_.fetch_add(1, std::memory_order_release);
    return true;
}

} // namespace sluice::detail

namespace sluice {

upstream::upstream(std::vector<std::string> addresses, upstream_options options)
    : state_(std::make_shared<detail::upstream_state>(std::move(addresses), std::move(options))) {}

const std::vector<std::string>& upstream::names() const noexcept {
    return state_->names();
}

} // namespace sluice
