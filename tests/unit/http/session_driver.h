// Test helpers for the server session: a driver that feeds bytes the way a connection does
// (unconsumed bytes stay buffered and are fed again with the next piece), and a plain copy
// of a parsed request that tests can compare.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/request.h>

#include "http/server_session.h"

namespace sluice::http::test {

/// Everything a parsed request exposes, as values.
struct parsed_request {
    std::string method;
    std::string target;
    std::string path;
    std::string query;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    http_version version;
    bool keep_alive = false;

    friend bool operator==(const parsed_request&, const parsed_request&) = default;
};

inline parsed_request snapshot(const request& r) {
    parsed_request p;
    p.method = r.method();
    p.target = r.target();
    p.path = r.path();
    p.query = r.query();
    for (const auto h : r.headers()) {
        p.headers.emplace_back(h.name, h.value);
    }
    p.body = r.body();
    p.version = r.version();
    p.keep_alive = r.keep_alive();
    return p;
}

/// The outcome of driving a session over some input.
struct outcome {
    std::vector<parsed_request> requests; ///< complete requests, in order
    std::vector<std::size_t> ends;        ///< input offset just past each request
    feed_status last = feed_status::need_more;
    phase final_phase = phase::idle;
    int error_status = 0;
    std::string error_reason;
    int continues = 0; ///< how many times take_continue() said yes
    /// What the failed request held when the session failed (the access log reads it).
    parsed_request at_failure;
};

/// Feeds `input` split into pieces at `cuts` (sorted offsets), as a connection would: bytes
/// the session did not consume are kept and fed again in front of the next piece. Every
/// complete request is recorded and the session moved to the next one. take_continue() is
/// polled after every feed.
inline outcome drive(std::string_view input, std::vector<std::size_t> cuts,
                     const session_limits& limits = {}) {
    server_session s{limits};
    request req;
    outcome out;
    std::string pending;        // received, not consumed yet
    std::size_t pending_at = 0; // input offset of pending[0]
    cuts.push_back(input.size());
    std::size_t prev = 0;
    for (const std::size_t cut : cuts) {
        pending.append(input.substr(prev, cut - prev));
        prev = cut;
        for (;;) {
            const feed_result r = s.feed(pending, req);
            out.last = r.status;
            pending.erase(0, r.consumed);
            pending_at += r.consumed;
            if (s.take_continue()) {
                ++out.continues;
            }
            if (r.status == feed_status::request_ready) {
                out.requests.push_back(snapshot(req));
                out.ends.push_back(pending_at);
                req.clear();
                s.next_request();
                continue; // pipelined bytes may hold the next request already
            }
            if (r.status == feed_status::failed) {
                out.at_failure = snapshot(req);
                out.final_phase = s.current_phase();
                out.error_status = s.error_status();
                out.error_reason = s.error_reason();
                return out;
            }
            break;
        }
    }
    out.final_phase = s.current_phase();
    return out;
}

inline outcome drive_whole(std::string_view input, const session_limits& limits = {}) {
    return drive(input, {}, limits);
}

inline outcome drive_bytewise(std::string_view input, const session_limits& limits = {}) {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < input.size(); ++i) {
        cuts.push_back(i);
    }
    return drive(input, std::move(cuts), limits);
}

/// Limits with a given header budget and the default body budget.
inline session_limits header_limit(std::size_t bytes) {
    session_limits l;
    l.max_header_bytes = bytes;
    return l;
}

inline session_limits body_limit(std::size_t bytes) {
    session_limits l;
    l.max_body_bytes = bytes;
    return l;
}

} // namespace sluice::http::test
