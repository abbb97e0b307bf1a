// Fuzz target: the client's response parser (http::client_session), as a streamed call and as
// a buffered one, on the same bytes. Any input must end in complete or failed (with an error)
// or still be waiting for bytes, never crash or trip a sanitizer, and:
// - feed() never consumes more than it was given, and nothing once complete or failed;
// - a buffered response stays within max_response_bytes (head + body);
// - a streamed call shows at most one head, and body pieces only after it; its body is never
//   kept in the response;
// - a complete final response has a status in 200..599; a response to HEAD has no body;
// - when both modes complete, they agree on status, headers and body (a streamed body is the
//   concatenation of its pieces), and on keep_alive.
//
// Input: byte 0 flags (bit 0: HEAD request; bit 1: finish() at the end, the upstream closed;
// bits 2-4: bytes per feed, 1 << n, 0 = all at once); byte 1: max_response_bytes = 64 + 16 * b;
// then the upstream's bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/client_session.h"

namespace {

using sluice::client_response;
using sluice::http::client_session;
using sluice::http::response_phase;

[[noreturn]] void violation(const char* what) {
    std::fprintf(stderr, "client_response_fuzz: %s\n", what);
    std::abort();
}

struct recording_sink final : sluice::http::response_sink {
    int heads = 0;
    int status = 0;
    std::size_t header_count = 0;
    std::string body;
    void on_response_head(client_response& head) noexcept override {
        ++heads;
        status = head.status;
        header_count = head.headers.size();
        if (!head.body.empty()) {
            violation("a head shown with a body");
        }
    }
    void on_response_body(std::string_view bytes) noexcept override {
        if (heads != 1) {
            violation("body before the head");
        }
        body.append(bytes);
    }
};

struct run {
    response_phase phase = response_phase::idle;
    std::error_code error;
    bool keep_alive = false;
    client_response res;
    recording_sink sink;
};

void parse(std::string_view wire, std::size_t piece, std::size_t max, std::size_t head_max, bool head,
           bool eof, bool stream, run& r) {
    client_session s(max, head_max);
    s.begin(head, r.res, stream ? &r.sink : nullptr);
    std::size_t at = 0;
    while (at < wire.size()) {
        const std::string_view part = wire.substr(at, piece == 0 ? wire.size() : piece);
        const response_phase before = s.phase();
        const std::size_t used = s.feed(part);
        if (used > part.size()) {
            violation("feed consumed more than it was given");
        }
        if ((before == response_phase::complete || before == response_phase::failed) && used != 0) {
            violation("feed consumed bytes after the end");
        }
        if (used < part.size()) {
            break; // the end of the response, or a failure: the rest is not this response's
        }
        at += used;
    }
    if (eof) {
        s.finish();
    }
    r.phase = s.phase();
    r.error = s.error();
    r.keep_alive = s.keep_alive();
    if (r.phase == response_phase::failed && !r.error) {
        violation("failed without an error");
    }
    if (r.phase == response_phase::complete && (r.res.status < 200 || r.res.status > 599)) {
        violation("a final response with a status outside 200..599");
    }
    if (stream) {
        if (!r.res.body.empty()) {
            violation("a streamed body was kept");
        }
        if (r.sink.heads > 1) {
            violation("two heads shown");
        }
        if (r.phase == response_phase::complete && r.sink.heads != 1) {
            violation("complete without a head shown");
        }
        if (head && !r.sink.body.empty()) {
            violation("a body for HEAD");
        }
    } else if (head && !r.res.body.empty()) {
        violation("a body for HEAD");
    } else if (r.res.body.size() > max) {
        violation("a buffered body over max_response_bytes");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) {
        return 0;
    }
    const bool head = (data[0] & 1) != 0;
    const bool eof = (data[0] & 2) != 0;
    const unsigned shift = (data[0] >> 2) & 7;
    const std::size_t piece = shift == 0 ? 0 : std::size_t{1} << (shift - 1);
    const std::size_t max = 64 + std::size_t{16} * data[1];
    const std::size_t head_max = 48 + std::size_t{8} * data[1]; // below max: both limits bite
    const std::string_view wire(reinterpret_cast<const char*>(data + 2), size - 2);

    run buffered;
    run streamed;
    parse(wire, piece, max, head_max, head, eof, false, buffered);
    parse(wire, piece, max, head_max, head, eof, true, streamed);
    if (buffered.phase == response_phase::complete && streamed.phase == response_phase::complete) {
        if (buffered.res.status != streamed.res.status || buffered.res.status != streamed.sink.status ||
            buffered.res.headers.size() != streamed.res.headers.size() ||
            buffered.res.body != streamed.sink.body || buffered.keep_alive != streamed.keep_alive) {
            violation("the buffered and the streamed parse disagree");
        }
    }
    // A streamed call only fails where a buffered one fails too (the buffered one may also
    // fail for size alone).
    if (streamed.phase == response_phase::failed && buffered.phase == response_phase::complete) {
        violation("streamed failed where buffered completed");
    }
    return 0;
}
