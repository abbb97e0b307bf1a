// The server session over llhttp (8.1, LLHTTP_STRICT_MODE, no lenient flags; obs-fold, which
// llhttp unfolds, is refused here). See server_session.h for the
// state diagram and the statuses.
//
// How the pieces fit:
// - feed() hands llhttp at most the head bytes still allowed, so a head over the limit is
//   caught after exactly max_header_bytes bytes, without buffering and whatever the split.
// - on_message_complete returns HPE_PAUSED: llhttp stops right after the request, and
//   llhttp_get_error_pos() says how much of the input the request used. Pipelined bytes
//   after it stay with the caller until next_request(), which resets the parser.
// - The callbacks check what llhttp leaves to its user: Host, the transfer codings, the
//   version, Expect and the limits. A failing callback puts the session in phase failed
//   before llhttp sees the error, so fail_parse() only maps llhttp's own errors.
// - The head reaches the request's arena in one copy per llhttp_execute, as received (the
//   receive buffer is only lent); the callbacks mark each field as a range of it, so a header
//   costs no copy of its own. Before feed() returns, every marked byte is in the arena, also
//   when the request failed: the access log reads a failed request's method and target.
#include "http/server_session.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <string_view>

#include "http/request_builder.h"
#include "http/tokens.h"

namespace sluice::http {

namespace {

// Host = uri-host [ ":" port ] (RFC 9110 §7.2): reg-name, IPv4 or an IP-literal in brackets,
// all drawn from unreserved / pct-encoded / sub-delims (RFC 3986 §3.2.2). Anything else ('/',
// '@', '?', whitespace) is an invalid field value, which RFC 9112 §3.2 answers with 400.
// One table lookup per byte: Host is in every HTTP/1.1 request.
constexpr auto host_bytes = [] {
    std::array<bool, 256> t{};
    for (int c = 0; c < 256; ++c) {
        t[static_cast<std::size_t>(c)] =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            std::string_view{"-._~!$&'()*+,;=%:[]"}.find(static_cast<char>(c)) != std::string_view::npos;
    }
    return t;
}();

bool valid_host(std::string_view host) noexcept {
    return std::all_of(host.begin(), host.end(),
                       [](char c) { return host_bytes[static_cast<unsigned char>(c)]; });
}

// The header names that inspect_header looks at. A name of another length is not read at all.
constexpr std::string_view host_field = "host";
constexpr std::string_view expect_field = "expect";
constexpr std::string_view transfer_encoding_field = "transfer-encoding";

constexpr bool inspected_name_size(std::size_t n) noexcept {
    return n == host_field.size() || n == expect_field.size() || n == transfer_encoding_field.size();
}

// The value of a callback that failed the session: llhttp stops and returns an error,
// which fail_parse() then leaves alone because the session is already failed.
constexpr int span_error = HPE_USER;
constexpr int callback_error = -1;

} // namespace

struct server_session::callbacks {
    static server_session& self(llhttp_t* p) noexcept { return *static_cast<server_session*>(p->data); }
    static detail::request_builder builder(llhttp_t* p) noexcept {
        return detail::request_builder{*self(p).req_};
    }

    static int fail(llhttp_t* p, int result, int status, const char* reason) noexcept {
        self(p).fail(status, reason);
        llhttp_set_error_reason(p, reason);
        return result;
    }

    // Storing a piece may allocate (until the request's buffers have warmed up). An exception
    // must not unwind through llhttp's C frames, so it fails the session instead; 503 as for
    // any other shortage of server resources (RFC 9110 §15.6.4).
    template <class Store>
    static int store(llhttp_t* p, Store&& do_store) noexcept {
        try {
            do_store(builder(p));
            return 0;
        } catch (...) {
            return fail(p, span_error, 503, "out of memory");
        }
    }

    static int on_message_begin(llhttp_t* p) noexcept {
        self(p).phase_ = phase::head;
        return 0;
    }

    static int on_method(llhttp_t* p, const char* at, std::size_t n) noexcept {
        builder(p).extend_method(self(p).mark(at, n), n);
        return 0;
    }

    static int on_url(llhttp_t* p, const char* at, std::size_t n) noexcept {
        // RFC 9112 §3.2: a request-target is visible ASCII. llhttp built without
        // LLHTTP_STRICT_MODE lets bytes >= 0x80 and HTAB through; a router or a log line
        // should never see them.
        for (std::size_t i = 0; i < n; ++i) {
            const auto c = static_cast<unsigned char>(at[i]);
            if (c <= 0x20 || c >= 0x7f) {
                return fail(p, span_error, 400, "invalid character in request target");
            }
        }
        builder(p).extend_target(self(p).mark(at, n), n);
        return 0;
    }

    static int on_version(llhttp_t* p, const char* at, std::size_t n) noexcept {
        server_session& s = self(p);
        // llhttp also reads "RTSP/" and "ICE/" request lines; HTTP-name is the case-sensitive
        // "HTTP" (RFC 9112 §2.3). The version's first piece follows the name and its slash.
        if (s.version_len_ == 0 && !s.follows(s.head_offset(at), "HTTP/")) {
            return fail(p, span_error, 400, "invalid protocol in request line");
        }
        s.version_len_ += n;
        s.version_end_ = s.head_offset(at + n);
        return 0;
    }

    static int on_version_complete(llhttp_t* p) noexcept {
        server_session& s = self(p);
        s.version_done_ = true;
        builder(p).set_version({p->http_major, p->http_minor});
        // llhttp accepts 0.9, 1.0, 1.1 and 2.0 here. Only HTTP/1.x is spoken on this
        // connection (RFC 9110 §15.6.6); "PRI * HTTP/2.0" (RFC 9113 §3.4) lands here too.
        if (p->http_major != 1) {
            return fail(p, callback_error, 505, "HTTP version not supported");
        }
        return 0;
    }

    static int on_header_field(llhttp_t* p, const char* at, std::size_t n) noexcept {
        server_session& s = self(p);
        if (s.phase_ == phase::body) { // a trailer field: checked, not kept
            if (n > 0) {
                s.header_state_ = header_state::name;
                s.name_last_ = at[n - 1];
            }
            return 0;
        }
        if (s.header_state_ != header_state::name) {
            const int r = store(p, [](detail::request_builder b) { b.begin_header(); });
            if (r != 0) {
                return r;
            }
            s.header_state_ = header_state::name;
        }
        if (n > 0) {
            s.name_last_ = at[n - 1];
        }
        builder(p).extend_header_name(s.mark(at, n), n);
        return 0;
    }

    static int on_header_field_complete(llhttp_t* p) noexcept {
        server_session& s = self(p);
        const bool trailer = s.phase_ == phase::body;
        // field-name = token (RFC 9110 §5.1), but llhttp takes ": value" as a field with an
        // empty name (and may then call no on_header_field at all). Trailer fields are field
        // lines too (RFC 9112 §7.1.2).
        if (s.header_state_ != header_state::name || (!trailer && builder(p).last_header_name().len == 0)) {
            return fail(p, callback_error, 400, trailer ? "empty trailer field name" : "empty header name");
        }
        if (trailer) {
            s.header_state_ = header_state::colon;
            return 0;
        }
        // RFC 9112 §5.1: whitespace between a field name and the colon MUST be rejected with
        // 400 (it smuggles "Transfer-Encoding " past proxies). llhttp built without
        // LLHTTP_STRICT_MODE keeps it as part of the name, so the check is here.
        if (is_ows(s.name_last_)) {
            return fail(p, callback_error, 400, "whitespace between header name and colon");
        }
        s.header_state_ = header_state::colon;
        return 0;
    }

    static int on_header_value(llhttp_t* p, const char* at, std::size_t n) noexcept {
        server_session& s = self(p);
        if (s.phase_ == phase::body) {
            return 0; // a trailer's value: its bytes are counted in feed()
        }
        // llhttp unfolds obs-fold: it skips the CRLF and goes on with the same value, so a
        // piece that does not start where the previous one of this value ended jumped a line
        // break. RFC 9112 §5.2 allows 400 or replacing it; we refuse (issue 7): a proxy could
        // not forward the header byte-exact, and other hops may split it differently.
        if (n == 0) {
            // llhttp reports an empty value as an empty piece at the start of the next line. A
            // second line break since the colon is an empty line folded onto a blank one
            // ("X:\r\n \r\n"), which llhttp drops without a piece of its own.
            if (s.header_state_ == header_state::colon &&
                s.line_breaks_between(s.span_end_ + 1, s.head_offset(at)) > 1) {
                return fail(p, span_error, 400, "obsolete line folding in a header");
            }
            return 0;
        }
        // The last field piece marked (span_end_) is the value's previous piece, or before the
        // first one the name's last.
        const std::size_t start = s.head_offset(at);
        if (s.header_state_ == header_state::value ? start != s.span_end_
                                                   : s.line_break_before_value(start)) {
            return fail(p, span_error, 400, "obsolete line folding in a header");
        }
        s.header_state_ = header_state::value;
        builder(p).extend_header_value(s.mark(at, n), n);
        return 0;
    }

    static int on_header_value_complete(llhttp_t* p) noexcept {
        server_session& s = self(p);
        if (s.phase_ == phase::body) {
            s.header_state_ = header_state::none;
            return 0;
        }
        if (s.header_state_ != header_state::colon && s.header_state_ != header_state::value) {
            return fail(p, callback_error, 400, "header value without a name");
        }
        s.header_state_ = header_state::none;
        // RFC 9110 §5.5: a field value excludes trailing whitespace, which llhttp hands over.
        detail::request_builder b = builder(p);
        const detail::request_builder::range name = b.last_header_name();
        detail::request_builder::range value = b.last_header_value();
        const std::size_t old_len = value.len;
        while (value.len > 0 && is_ows(s.head_byte(value.off + value.len - 1 - s.head_base_))) {
            --value.len;
        }
        if (value.len != old_len) {
            b.truncate_last_header_value(value.len);
        }
        if (!inspected_name_size(name.len)) {
            return 0;
        }
        // A field that began in an earlier read and ends in this one is copied whole first, so
        // that both views below are of one place.
        const std::size_t name_head = name.off - s.head_base_;
        const std::size_t end = (value.len > 0 ? value.off + value.len : name.off + name.len) - s.head_base_;
        if (name_head < s.copied_ && end > s.copied_) {
            try {
                s.copy_head_until(end);
            } catch (const std::bad_alloc&) {
                return fail(p, callback_error, 503, "out of memory");
            }
        }
        s.inspect_header(s.head_text(name), s.head_text(value));
        return s.phase_ == phase::failed ? callback_error : 0;
    }

    static int on_headers_complete(llhttp_t* p) noexcept { return self(p).check_head(); }

    static int on_body(llhttp_t* p, const char* at, std::size_t n) noexcept {
        server_session& s = self(p);
        // Content-Length was checked against the limit up front; this catches chunked data.
        if (s.req_->body().size() + n > s.limits_.max_body_bytes) {
            return fail(p, span_error, 413, "request body too large");
        }
        return store(p, [&](detail::request_builder b) { b.append_body({at, n}); });
    }

    static int on_chunk_header(llhttp_t* p) noexcept {
        server_session& s = self(p);
        // The chunk size is known before its data: refuse a chunk that cannot fit at once,
        // instead of after reading up to the limit.
        if (p->content_length > s.limits_.max_body_bytes - s.req_->body().size()) {
            return fail(p, callback_error, 413, "request body too large");
        }
        // The last chunk: the trailer section follows. Pausing here lets feed() count its
        // bytes from their first, as it counts the head's.
        if (p->content_length == 0) {
            s.in_trailers_ = true;
            return HPE_PAUSED;
        }
        return 0;
    }

    // Chunk extensions are framing, not content, and llhttp passes them by: they are only
    // counted, so that an endless extension cannot keep the connection busy for free
    // (the llhttp 9.1.3 / CVE-2024-22019 problem).
    static int on_chunk_extension(llhttp_t* p, const char*, std::size_t n) noexcept {
        server_session& s = self(p);
        s.extra_bytes_ += n;
        if (s.extra_bytes_ > s.limits_.max_header_bytes) {
            return fail(p, span_error, 413, "chunk extensions too large");
        }
        return 0;
    }

    static int on_message_complete(llhttp_t* p) noexcept {
        server_session& s = self(p);
        s.phase_ = phase::ready;
        s.continue_pending_ = false; // the whole body is here: nothing to ask for
        return HPE_PAUSED;
    }
};

namespace {

// The callbacks never change: one table serves every session (a per-session copy would
// cost ~200 bytes of every idle connection).
llhttp_settings_t make_settings() noexcept {
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_message_begin = &server_session::callbacks::on_message_begin;
    settings.on_method = &server_session::callbacks::on_method;
    settings.on_url = &server_session::callbacks::on_url;
    settings.on_version = &server_session::callbacks::on_version;
    settings.on_version_complete = &server_session::callbacks::on_version_complete;
    settings.on_header_field = &server_session::callbacks::on_header_field;
    settings.on_header_field_complete = &server_session::callbacks::on_header_field_complete;
    settings.on_header_value = &server_session::callbacks::on_header_value;
    settings.on_header_value_complete = &server_session::callbacks::on_header_value_complete;
    settings.on_headers_complete = &server_session::callbacks::on_headers_complete;
    settings.on_body = &server_session::callbacks::on_body;
    settings.on_chunk_header = &server_session::callbacks::on_chunk_header;
    settings.on_chunk_extension_name = &server_session::callbacks::on_chunk_extension;
    settings.on_chunk_extension_value = &server_session::callbacks::on_chunk_extension;
    settings.on_message_complete = &server_session::callbacks::on_message_complete;
    return settings;
}

const llhttp_settings_t session_settings = make_settings();

} // namespace

server_session::server_session(const session_limits& limits) noexcept : limits_(limits) {
    llhttp_init(&parser_, HTTP_REQUEST, &session_settings);
    parser_.data = this;
}

feed_result server_session::feed(std::string_view bytes, request& req) {
    if (phase_ == phase::ready) {
        return {feed_status::request_ready, 0};
    }
    if (phase_ == phase::failed) {
        return {feed_status::failed, 0};
    }
    req_ = &req;
    if (phase_ == phase::idle && head_bytes_ == 0) {
        head_base_ = detail::request_builder{req}.arena_size();
    }
    std::size_t consumed = 0;
    while (consumed < bytes.size()) {
        std::size_t n = bytes.size() - consumed;
        const bool in_head = phase_ == phase::idle || phase_ == phase::head;
        const bool in_trailers = phase_ == phase::body && in_trailers_;
        if (in_head) {
            n = std::min(n, limits_.max_header_bytes - head_bytes_);
        } else if (in_trailers) {
            n = std::min(n, limits_.max_header_bytes - trailer_bytes_);
        }
        exec_begin_ = bytes.data() + consumed;
        const llhttp_errno_t err = llhttp_execute(&parser_, exec_begin_, n);
        const bool still_in_head = err == HPE_OK && (phase_ == phase::idle || phase_ == phase::head);
        // Whatever happened, every field marked so far is in the arena before feed returns: a
        // failed request's method and target still reach the access log.
        try {
            copy_head_until(still_in_head ? head_bytes_ + n : span_end_);
        } catch (const std::bad_alloc&) {
            detail::request_builder{req}.drop_head();
            copied_ = head_bytes_; // nothing of this piece is in the arena, and nothing refers to it
            if (phase_ != phase::failed) {
                fail(503, "out of memory");
            }
            consumed +=
                still_in_head ? n : static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - exec_begin_);
            return {feed_status::failed, consumed};
        }
        if (err == HPE_OK) {
            consumed += n;
            if (still_in_head) {
                // Where the last line break of this piece was: a value's first piece may come in
                // a later one (line_break_before_value).
                for (std::size_t i = n; i > 0; --i) {
                    if (exec_begin_[i - 1] == '\n') {
                        last_lf_end_ = head_bytes_ + i;
                        break;
                    }
                }
                head_bytes_ += n;
                // The head is still not complete after max_header_bytes bytes: no need to
                // wait for the byte that proves it is too large.
                if (head_bytes_ >= limits_.max_header_bytes) {
                    fail_head_too_large();
                    return {feed_status::failed, consumed};
                }
            } else if (in_trailers) {
                // Trailer fields (RFC 9112 §7.1.2) are received and dropped: RFC 9110 §6.5.1
                // forbids merging them into the header section unless their definitions allow
                // it, and no handler asks for them. Their section is held to the header limit,
                // every byte of it, and fails once it is reached without its end.
                trailer_bytes_ += n;
                if (trailer_bytes_ >= limits_.max_header_bytes) {
                    fail(431, "trailer fields too large");
                    return {feed_status::failed, consumed};
                }
            }
            continue;
        }
        const char* stop = llhttp_get_error_pos(&parser_);
        const auto used = static_cast<std::size_t>(stop - exec_begin_);
        consumed += used;
        if (err == HPE_PAUSED && phase_ == phase::ready) {
            if (in_trailers) {
                trailer_bytes_ += used; // its end: not a failure even when exactly at the limit
            }
            return {feed_status::request_ready, consumed};
        }
        if (err == HPE_PAUSED && phase_ == phase::body && in_trailers_ && !in_trailers) {
            llhttp_resume(&parser_); // paused at the last chunk: go on counting the trailers
            continue;
        }
        fail_parse(err, {exec_begin_, n});
        return {feed_status::failed, consumed};
    }
    return {feed_status::need_more, consumed};
}

bool server_session::take_continue() noexcept {
    if (continue_pending_ && phase_ == phase::body) {
        continue_pending_ = false;
        return true;
    }
    return false;
}

void server_session::fail(int status, std::string_view reason) noexcept {
    phase_ = phase::failed;
    error_status_ = status;
    error_reason_ = reason;
    continue_pending_ = false;
}

void server_session::next_request() noexcept {
    if (phase_ != phase::ready) {
        return; // failed stays failed: the connection closes after the error response
    }
    // A reset rather than llhttp_resume(): the parser starts the next message from a clean
    // state whatever the last one left behind (llhttp would treat bytes after a
    // "Connection: close" request as an error or drop them; the connection decides that).
    llhttp_reset(&parser_);
    reset_request_state();
}

void server_session::reset() noexcept {
    llhttp_reset(&parser_);
    reset_request_state();
    error_status_ = 0;
    error_reason_ = {};
}

void server_session::reset_request_state() noexcept {
    req_ = nullptr;
    phase_ = phase::idle;
    head_bytes_ = 0;
    expect_continue_ = false;
    continue_pending_ = false;
    host_headers_ = 0;
    header_state_ = header_state::none;
    exec_begin_ = nullptr;
    version_end_ = 0;
    version_len_ = 0;
    extra_bytes_ = 0;
    trailer_bytes_ = 0;
    in_trailers_ = false;
    last_lf_end_ = 0;
    version_done_ = false;
    te_seen_ = false;
    te_last_chunked_ = false;
    te_other_coding_ = false;
    te_chunked_count_ = 0;
    head_base_ = 0;
    copied_ = 0;
    span_end_ = 0;
    name_last_ = '\0';
}

std::size_t server_session::mark(const char* at, std::size_t n) noexcept {
    const std::size_t start = head_offset(at);
    span_end_ = start + n;
    return head_base_ + start;
}

void server_session::copy_head_until(std::size_t end) {
    if (end <= copied_) {
        return;
    }
    detail::request_builder{*req_}.append_head({exec_begin_ + (copied_ - head_bytes_), end - copied_});
    copied_ = end;
}

std::string_view server_session::head_text(detail::request_builder::range r) const noexcept {
    if (r.len == 0) {
        return {};
    }
    const std::size_t off = r.off - head_base_;
    if (off < copied_) {
        return detail::request_builder{*req_}.arena_view(r);
    }
    return {exec_begin_ + (off - head_bytes_), r.len};
}

char server_session::head_byte(std::size_t off) const noexcept {
    return head_text({head_base_ + off, 1})[0];
}

std::size_t server_session::head_offset(const char* p) const noexcept {
    return head_bytes_ + static_cast<std::size_t>(p - exec_begin_);
}

bool server_session::follows(std::size_t off, std::string_view text) const noexcept {
    if (off < text.size()) {
        return false;
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (head_byte(off - text.size() + i) != text[i]) {
            return false;
        }
    }
    return true;
}

std::size_t server_session::line_breaks_between(std::size_t from, std::size_t to) const noexcept {
    std::size_t n = 0;
    for (std::size_t off = from; off < to; ++off) {
        if (head_byte(off) == '\n') {
            ++n;
        }
    }
    return n;
}

bool server_session::line_break_before_value(std::size_t value_start) const noexcept {
    // An empty first line folded onto the next ("X:\r\n b") reaches the value as leading
    // whitespace: between the colon (just past the name's last piece, which is the last piece
    // marked) and the value, llhttp skipped a LF. The skipped bytes in this piece are looked at
    // here; those of earlier pieces left their last LF's place in last_lf_end_.
    const std::size_t from = span_end_ + 1;
    if (last_lf_end_ > from && last_lf_end_ <= head_bytes_) {
        return true;
    }
    for (std::size_t off = std::max(from, head_bytes_); off < value_start; ++off) {
        if (exec_begin_[off - head_bytes_] == '\n') {
            return true;
        }
    }
    return false;
}

void server_session::fail_head_too_large() noexcept {
    // 414 when the request line alone (with its CRLF) does not fit, 431 otherwise
    // (RFC 9110 §15.5.15, RFC 6585 §5). Without the version, the line is longer than
    // everything seen so far.
    const bool line_fits = version_done_ && version_end_ + 2 <= limits_.max_header_bytes;
    if (line_fits) {
        fail(431, "request header fields too large");
    } else {
        fail(414, "request line too long");
    }
}

void server_session::inspect_header(std::string_view name, std::string_view value) noexcept {
    switch (name.size()) {
    case host_field.size():
        if (iequals(name, host_field)) {
            // RFC 9112 §3.2: more than one Host, or an invalid one, is a 400.
            if (++host_headers_ > 1) {
                fail(400, "more than one Host header");
            } else if (!valid_host(value)) {
                fail(400, "invalid Host header");
            }
        }
        return;
    case expect_field.size():
        if (iequals(name, expect_field) && iequals(value, "100-continue")) {
            expect_continue_ = true;
        }
        return;
    case transfer_encoding_field.size():
        if (!iequals(name, transfer_encoding_field)) {
            return;
        }
        // The field counts even when it names no coding: a hop that reads any Transfer-Encoding
        // as chunked would frame the body differently.
        te_seen_ = true;
        // transfer-coding list (RFC 9112 §6.1), possibly over several header lines, each
        // member "name *( OWS ; OWS param )". Empty members are allowed (RFC 9110 §5.6.1).
        while (!value.empty()) {
            const std::size_t comma = value.find(',');
            std::string_view member = value.substr(0, comma);
            value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
            member = trim_ows(member.substr(0, member.find(';')));
            if (member.empty()) {
                continue;
            }
            te_last_chunked_ = iequals(member, "chunked");
            if (te_last_chunked_) {
                ++te_chunked_count_;
            } else {
                te_other_coding_ = true;
            }
        }
        return;
    default:
        return;
    }
}

int server_session::check_head() noexcept {
    llhttp_t* p = &parser_;
    detail::request_builder b{*req_};
    const bool http11 = p->http_minor >= 1;

    // llhttp takes "GET /" without a version as an HTTP/0.9 simple-request; RFC 9112 §3
    // requires the version, and answering 0.9 would mean a response without a head.
    if (!version_done_) {
        return callbacks::fail(p, callback_error, 400, "missing HTTP version");
    }
    if (http11 && host_headers_ == 0) {
        return callbacks::fail(p, callback_error, 400, "missing Host header");
    }
    const bool has_length = (p->flags & F_CONTENT_LENGTH) != 0;
    if (te_seen_ || (p->flags & F_TRANSFER_ENCODING) != 0) {
        // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means faulty framing.
        if (!http11) {
            return callbacks::fail(p, callback_error, 400, "Transfer-Encoding in an HTTP/1.0 request");
        }
        // RFC 9112 §6.3 item 3; llhttp checks it only when the field names a coding.
        if (has_length) {
            return callbacks::fail(p, callback_error, 400, "both Content-Length and Transfer-Encoding");
        }
        if (te_chunked_count_ == 0 && !te_other_coding_) {
            return callbacks::fail(p, callback_error, 400, "empty Transfer-Encoding");
        }
        // RFC 9112 §6.3 item 4: chunked must be the final coding, and §7.1 forbids applying it
        // twice; otherwise the body length cannot be known.
        if (!te_last_chunked_ || te_chunked_count_ > 1) {
            return callbacks::fail(p, callback_error, 400, "chunked is not the final transfer coding");
        }
        // RFC 9112 §6.1: a transfer coding the server does not understand gets 501.
        if (te_other_coding_) {
            return callbacks::fail(p, callback_error, 501, "transfer coding not implemented");
        }
    }
    // This server is an origin server, not a tunnel (RFC 9110 §9.3.6).
    if (p->method == HTTP_CONNECT) {
        return callbacks::fail(p, callback_error, 501, "CONNECT not implemented");
    }
    // Refuse a declared body over the limit before reading it, and before any 100 Continue
    // (RFC 9110 §10.1.1: the server may answer with a final status instead).
    if (has_length && p->content_length > limits_.max_body_bytes) {
        return callbacks::fail(p, callback_error, 413, "request body too large");
    }

    // RFC 9112 §9.3: persistent by default in 1.1 unless "close"; 1.0 only with "keep-alive".
    // llhttp parses the Connection tokens into flags; "close" wins over "keep-alive".
    const bool close = (p->flags & F_CONNECTION_CLOSE) != 0;
    const bool keep = (p->flags & F_CONNECTION_KEEP_ALIVE) != 0;
    b.set_keep_alive(!close && (http11 || keep));
    try {
        copy_head_until(span_end_); // the target's last piece may be in this read
        b.finish_target();          // may add "/" to the arena for an absolute-form target without a path
    } catch (const std::bad_alloc&) {
        return callbacks::fail(p, callback_error, 503, "out of memory");
    }
    // RFC 9112 §3.2: a request-target has no fragment (a router and the hop after it could
    // differ on where the path ends). RFC 9110 §4.2.1: an http(s) URI with an empty host is
    // invalid; §4.2.4: userinfo in one is an error. The authority then stands for Host.
    const std::string_view target = req_->target();
    if (target.find('#') != std::string_view::npos) {
        return callbacks::fail(p, callback_error, 400, "fragment in request target");
    }
    // RFC 9112 §3.2.4: the asterisk-form is only for a server-wide OPTIONS.
    if (target == "*" && p->method != HTTP_OPTIONS) {
        return callbacks::fail(p, callback_error, 400, "asterisk-form target without OPTIONS");
    }
    if (const target_authority a = absolute_form_authority(target); a.is_absolute) {
        if (a.authority.empty() || a.authority.front() == ':') {
            return callbacks::fail(p, callback_error, 400, "no host in request target");
        }
        if (!valid_host(a.authority)) { // '@' is not a host byte: userinfo fails here
            return callbacks::fail(p, callback_error, 400, "invalid authority in request target");
        }
    }

    const bool body_follows = (p->flags & F_CHUNKED) != 0 || (has_length && p->content_length > 0);
    // RFC 9110 §10.1.1: a server MUST ignore 100-continue in an HTTP/1.0 request.
    continue_pending_ = expect_continue_ && http11 && body_follows;
    // No body_.reserve(content_length): a client could make every idle connection hold
    // max_body_bytes by declaring a length and sending nothing.

    // An Upgrade request (RFC 9110 §7.8) is served as a plain request: a server MAY ignore
    // Upgrade, and llhttp would otherwise stop with HPE_PAUSED_UPGRADE after the head.
    p->upgrade = 0;
    phase_ = phase::body;
    return 0;
}

void server_session::fail_parse(llhttp_errno_t err, std::string_view input) noexcept {
    if (phase_ == phase::failed) {
        return; // a callback already chose the status
    }
    switch (err) {
    case HPE_INVALID_METHOD: {
        // llhttp matches methods against its table and stops at the first byte that leaves
        // it. If the method so far is a token that goes on, or a whole token ended by SP, it
        // is well-formed but unknown: 501 (RFC 9110 §9.1). Anything else is garbage: 400.
        const auto at = static_cast<std::size_t>(llhttp_get_error_pos(&parser_) - input.data());
        std::size_t token = detail::request_builder{*req_}.method_size();
        for (std::size_t i = std::min(at, input.size()); i > 0 && is_tchar(input[i - 1]); --i) {
            ++token;
        }
        const char c = at < input.size() ? input[at] : '\0';
        if (is_tchar(c) || (c == ' ' && token > 0)) {
            fail(501, "method not implemented");
        } else {
            fail(400, "invalid request method");
        }
        return;
    }
    case HPE_INVALID_VERSION:
        // A well-formed "HTTP/d.d" that llhttp refuses (3.0, 1.2; no LENIENT_VERSION) is a
        // version this server does not speak; anything else is bad syntax.
        if (!version_done_ && version_len_ == 3) {
            fail(505, "HTTP version not supported");
        } else {
            fail(400, "invalid HTTP version");
        }
        return;
    case HPE_PAUSED_H2_UPGRADE:
        fail(505, "HTTP version not supported");
        return;
    default:
        // Everything else is a malformed message: bad characters, bare LF where llhttp wants
        // CRLF, Content-Length with Transfer-Encoding, duplicate or invalid Content-Length,
        // a bad chunk size. llhttp's reasons are string literals, so the view stays valid.
        const char* reason = llhttp_get_error_reason(&parser_);
        fail(400, reason != nullptr ? std::string_view{reason} : std::string_view{"bad request"});
        return;
    }
}

} // namespace sluice::http
