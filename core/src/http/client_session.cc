// The client session over llhttp 8.1 in response mode, no lenient flags. See
// client_session.h for the state diagram and what is refused.
//
// How the pieces fit:
// - feed() hands llhttp at most the bytes still allowed by max_response_bytes, so an
//   oversized response is caught after exactly that many bytes, whatever the split.
// - on_message_complete of a final response returns HPE_PAUSED: llhttp stops right after
//   it and llhttp_get_error_pos() says how much input it used. A 1xx response completes
//   too; its message is dropped and parsing continues with the next one (RFC 9110 §15.2).
// - A failing callback fails the session before llhttp reports its error, so llhttp's own
//   errors map to malformed_response only when nothing else was said.
// - hold_body() makes on_headers_complete return HPE_PAUSED as well: llhttp stops before the
//   body, and llhttp_resume() (release()) lets the next llhttp_execute go on from there, with
//   the bytes from llhttp_get_error_pos() on.
#include "http/client_session.h"

#include <algorithm>
#include <string_view>

#include <sluice/request.h>

#include "http/tokens.h"

namespace sluice::http {

namespace {

constexpr int callback_error = -1;
/// Fields reserved at a response's first one (typical upstream answers have 3 to 8).
constexpr std::size_t typical_fields = 8;

} // namespace

struct client_session::callbacks {
    static client_session& self(llhttp_t* p) noexcept { return *static_cast<client_session*>(p->data); }

    static int fail(llhttp_t* p, client_errc e) noexcept {
        self(p).fail(e);
        return callback_error;
    }

    // Appending may allocate; an exception must not unwind through llhttp's C frames.
    template <class Store>
    static int store(llhttp_t* p, Store&& do_store) noexcept {
        try {
            do_store(*self(p).out_);
            return 0;
        } catch (...) {
            return fail(p, client_errc::response_too_large);
        }
    }

    static int on_message_begin(llhttp_t* p) noexcept {
        self(p).phase_ = response_phase::head;
        return 0;
    }

    static int on_version_complete(llhttp_t* p) noexcept {
        // llhttp takes any digit pair; only HTTP/1.x is spoken here (RFC 9110 §2.5).
        return p->http_major == 1 ? 0 : fail(p, client_errc::malformed_response);
    }

    static int on_header_field(llhttp_t* p, const char* at, std::size_t n) noexcept {
        client_session& s = self(p);
        if (s.phase_ == response_phase::body) {
            return 0; // a trailer field: dropped (RFC 9110 §6.5.1), counted by feed()
        }
        const bool first_piece = s.in_value_ || s.out_->headers.empty() || !s.in_name_;
        if (first_piece && s.out_->headers.size() >= max_fields) {
            return fail(p, client_errc::response_too_large);
        }
        s.in_value_ = false;
        s.in_name_ = true;
        return store(p, [&](client_response& r) {
            if (first_piece) {
                if (r.headers.capacity() == 0) {
                    // One allocation for a typical response's fields, not one per doubling.
                    r.headers.reserve(typical_fields);
                }
                r.headers.emplace_back();
            }
            r.headers.back().name.append(at, n);
        });
    }

    static int on_header_value(llhttp_t* p, const char* at, std::size_t n) noexcept {
        client_session& s = self(p);
        if (s.phase_ == response_phase::body) {
            return 0;
        }
        s.in_value_ = true;
        s.in_name_ = false;
        return store(p, [&](client_response& r) { r.headers.back().value.append(at, n); });
    }

    static int on_header_field_complete(llhttp_t* p) noexcept {
        client_session& s = self(p);
        if (s.phase_ == response_phase::body) {
            return 0;
        }
        // RFC 9112 §5.1: whitespace before the colon MUST be rejected (llhttp without strict
        // mode keeps it in the name). A field with no name at all is no field.
        if (s.out_->headers.empty() || s.out_->headers.back().name.empty() ||
            is_ows(s.out_->headers.back().name.back())) {
            return fail(p, client_errc::malformed_response);
        }
        return 0;
    }

    static int on_header_value_complete(llhttp_t* p) noexcept {
        client_session& s = self(p);
        if (s.phase_ == response_phase::body) {
            return 0;
        }
        s.in_value_ = true;
        s.in_name_ = false;
        client_header& h = s.out_->headers.back();
        // Trimmed in place: the value keeps its buffer (a copy would allocate per field).
        const std::string_view trimmed = trim_ows(h.value);
        const std::size_t lead = static_cast<std::size_t>(trimmed.data() - h.value.data());
        h.value.resize(lead + trimmed.size());
        h.value.erase(0, lead);
        if (iequals(h.name, "transfer-encoding")) {
            s.inspect_codings(h.value);
        }
        return 0;
    }

    static int on_headers_complete(llhttp_t* p) noexcept {
        client_session& s = self(p);
        const int status = p->status_code;
        if (status == 101 || status < 100 || status > 599) {
            return fail(p, client_errc::malformed_response); // no upgrade was asked for
        }
        // Only "chunked", once and last, is a framing a proxy can pass on as a plain body.
        if (s.te_seen_ && (!s.te_chunked_last_ || s.te_other_)) {
            return fail(p, client_errc::malformed_response);
        }
        s.out_->status = status;
        s.phase_ = response_phase::body;
        // A response to HEAD has no body whatever its headers say (RFC 9110 §9.3.2), nor has a
        // 1xx, a 204 or a 304 (RFC 9112 §6.3 (1): it ends with its header section); 1 tells
        // llhttp so. llhttp 8.1 skips the body of a 204 or a 304 only when it declares neither
        // chunked nor a length, and reads one for a 1xx that does (which then went to the
        // stream ahead of the final head: found by the client_response fuzz target).
        const bool no_body = s.head_request_ || status < 200 || status == 204 || status == 304;
        if (s.sink_ != nullptr && status >= 200) {
            s.hold_wanted_ = false;
            s.sink_->on_response_head(*s.out_);
            if (s.hold_wanted_ && !s.head_request_) {
                // llhttp stops here and goes on with the body after llhttp_resume() (feed()). A
                // pause cannot return 1, so the flag that 1 would set is set here.
                if (no_body) {
                    p->flags |= F_SKIPBODY;
                }
                s.holding_ = true;
                return HPE_PAUSED;
            }
        }
        return no_body ? 1 : 0;
    }

    static int on_body(llhttp_t* p, const char* at, std::size_t n) noexcept {
        client_session& s = self(p);
        if (s.sink_ != nullptr) {
            s.sink_->on_response_body({at, n});
            return 0;
        }
        return store(p, [&](client_response& r) { r.body.append(at, n); });
    }

    static int on_message_complete(llhttp_t* p) noexcept {
        client_session& s = self(p);
        if (s.out_->status < 200) {
            s.reset_message(); // an interim response: the final one follows
            return 0;
        }
        s.phase_ = response_phase::complete;
        s.keep_alive_ = llhttp_should_keep_alive(p) != 0;
        return HPE_PAUSED;
    }
};

namespace {

llhttp_settings_t make_settings() noexcept {
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    using cb = client_session::callbacks;
    settings.on_message_begin = &cb::on_message_begin;
    settings.on_version_complete = &cb::on_version_complete;
    settings.on_header_field = &cb::on_header_field;
    settings.on_header_field_complete = &cb::on_header_field_complete;
    settings.on_header_value = &cb::on_header_value;
    settings.on_header_value_complete = &cb::on_header_value_complete;
    settings.on_headers_complete = &cb::on_headers_complete;
    settings.on_body = &cb::on_body;
    settings.on_message_complete = &cb::on_message_complete;
    return settings;
}

const llhttp_settings_t& settings() noexcept {
    static const llhttp_settings_t s = make_settings();
    return s;
}

} // namespace

client_session::client_session(std::size_t max_response_bytes, std::size_t max_head_bytes) noexcept
    : max_bytes_(max_response_bytes), max_head_bytes_(max_head_bytes) {
    llhttp_init(&parser_, HTTP_RESPONSE, &settings());
    parser_.data = this;
}

void client_session::begin(bool head_request, client_response& out, response_sink* sink) noexcept {
    llhttp_init(&parser_, HTTP_RESPONSE, &settings());
    parser_.data = this;
    out_ = &out;
    sink_ = sink;
    head_request_ = head_request;
    received_ = 0;
    phase_ = response_phase::idle;
    error_ = {};
    keep_alive_ = false;
    hold_wanted_ = false;
    holding_ = false;
    reset_message();
}

void client_session::reset_message() noexcept {
    out_->status = 0;
    out_->headers.clear();
    out_->body.clear();
    if (phase_ != response_phase::idle) {
        phase_ = response_phase::head;
    }
    in_value_ = false;
    in_name_ = false;
    te_seen_ = false;
    te_chunked_last_ = false;
    te_other_ = false;
}

void client_session::inspect_codings(std::string_view value) noexcept {
    // A list of codings (RFC 9112 §6.1), possibly over several fields: remember whether the
    // last one is chunked and whether any other appears.
    te_seen_ = true;
    while (!value.empty()) {
        const auto comma = value.find(',');
        const std::string_view item = trim_ows(value.substr(0, comma));
        if (!item.empty()) {
            if (te_chunked_last_) {
                te_other_ = true; // chunked is not last (or appears twice)
            }
            te_chunked_last_ = iequals(item, "chunked");
            if (!te_chunked_last_) {
                te_other_ = true;
            }
        }
        value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    }
}

void client_session::fail(client_errc e) noexcept {
    if (phase_ != response_phase::failed) {
        phase_ = response_phase::failed;
        error_ = e;
    }
}

void client_session::release() noexcept {
    if (!holding_) {
        return;
    }
    holding_ = false;
    llhttp_resume(&parser_);
    // No bytes: llhttp runs the steps after the head that need none (Content-Length: 0, a 204
    // ends), and stops where the body's first byte is wanted. HPE_PAUSED is then ours.
    static constexpr char none[1] = {};
    const llhttp_errno_t err = llhttp_execute(&parser_, none, 0);
    if (err != HPE_OK && err != HPE_PAUSED) {
        fail(client_errc::malformed_response);
    }
}

std::size_t client_session::feed(std::string_view bytes) noexcept {
    release();
    if (phase_ == response_phase::complete || phase_ == response_phase::failed || bytes.empty()) {
        return 0;
    }
    if (phase_ == response_phase::idle) {
        phase_ = response_phase::head;
    }
    // received_ saturates at max_bytes_ (a streamed body may go past it), so neither wraps.
    std::size_t allowed = max_bytes_ - received_;
    if (phase_ == response_phase::head) {
        allowed = std::min(allowed, max_head_bytes_ - std::min(received_, max_head_bytes_));
    }
    const std::size_t n = std::min(bytes.size(), allowed);
    llhttp_errno_t err = n == 0 ? HPE_OK : llhttp_execute(&parser_, bytes.data(), n);
    std::size_t used = n;
    if (err == HPE_OK && phase_ == response_phase::body && n < bytes.size()) {
        // The rest is body (and trailers, and the end). A streamed body is not kept, so it goes
        // through unbounded; a buffered one within what max_bytes_ leaves.
        const std::size_t left = max_bytes_ - std::min(max_bytes_, received_ + n);
        const std::size_t m = sink_ != nullptr ? bytes.size() - n : std::min(bytes.size() - n, left);
        err = m == 0 ? HPE_OK : llhttp_execute(&parser_, bytes.data() + n, m);
        used = n + m;
    }
    if (err == HPE_PAUSED) {
        used = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - bytes.data());
    } else if (err != HPE_OK) {
        fail(client_errc::malformed_response);
    }
    received_ = used > max_bytes_ - received_ ? max_bytes_ : received_ + used;
    // Every byte handed to llhttp is taken unless it paused: fewer means a limit held them back.
    if (phase_ != response_phase::complete && phase_ != response_phase::failed && !holding_ &&
        used < bytes.size()) {
        fail(client_errc::response_too_large);
    }
    return used;
}

void client_session::finish() noexcept {
    release();
    if (phase_ == response_phase::complete || phase_ == response_phase::failed) {
        return;
    }
    // llhttp_finish() runs on_message_complete for a body that ends with the stream; its
    // HPE_PAUSED is then ours.
    if (phase_ != response_phase::idle) {
        const llhttp_errno_t err = llhttp_finish(&parser_);
        (void)err;
    }
    if (phase_ == response_phase::complete) {
        keep_alive_ = false; // the body ended with the connection
        return;
    }
    fail(client_errc::reset); // the connection ended before the response did
}

} // namespace sluice::http
