// Fills a request: every byte of its head goes into the request's arena (in bulk from the
// parser, or piece by piece) and fields are (offset, length) slices of it, so a warmed-up
// request allocates nothing.
#include "http/request_builder.h"

#include <cstdint>
#include <string_view>

#include "http/tokens.h"

namespace sluice::detail {

namespace {

using http::is_ows;

} // namespace

// The pieces of one field are appended back to back with nothing in between, so a slice
// only ever grows at the end of the arena: the piece's bytes, then the field marks them.
void request_builder::append(request::slice& s, std::string_view piece) {
    const std::size_t off = r_.arena_.size();
    r_.arena_.append(piece);
    extend(s, off, piece.size());
}

void request_builder::drop_head() noexcept {
    r_.method_ = {};
    r_.target_ = {};
    r_.path_ = {};
    r_.query_ = {};
    r_.headers_.clear();
}

void request_builder::append_method(std::string_view piece) {
    append(r_.method_, piece);
}

void request_builder::append_target(std::string_view piece) {
    append(r_.target_, piece);
}

void request_builder::begin_header() {
    r_.headers_.emplace_back();
}

void request_builder::append_header_name(std::string_view piece) {
    append(r_.headers_.back().first, piece);
}

void request_builder::append_header_value(std::string_view piece) {
    append(r_.headers_.back().second, piece);
}

// RFC 9110 §5.5: a field value excludes leading and trailing whitespace. llhttp skips the
// leading OWS but hands the trailing OWS over as part of the value.
void request_builder::finish_header() {
    if (r_.headers_.empty()) {
        return;
    }
    request::slice& v = r_.headers_.back().second;
    while (v.len > 0 && is_ows(r_.arena_[v.off + v.len - 1])) {
        --v.len;
    }
}

// origin-form = absolute-path [ "?" query ] (RFC 9112 §3.2.1): the path ends at the first '?'.
// absolute-form (§3.2.2, which a server MUST accept): "http://authority/path?query"; the path
// starts at the first '/' after the authority, and is "/" when the target has none.
void request_builder::finish_target() {
    const std::string_view t = r_.target();
    // An absolute-form target's path starts after its authority (RFC 9112 §3.2.2).
    const http::target_authority a = http::absolute_form_authority(t);
    const bool absolute = a.is_absolute;
    const std::size_t start =
        absolute ? static_cast<std::size_t>(a.authority.data() - t.data()) + a.authority.size() : 0;
    const std::size_t q = t.find('?', start);
    const std::size_t path_end = q == std::string_view::npos ? t.size() : q;
    if (q != std::string_view::npos) {
        r_.query_ = {static_cast<std::uint32_t>(r_.target_.off + q + 1),
                     static_cast<std::uint32_t>(t.size() - q - 1)};
    }
    if (absolute && path_end == start) {
        r_.path_ = {static_cast<std::uint32_t>(r_.arena_.size()), 1};
        r_.arena_.push_back('/');
        return;
    }
    r_.path_ = {static_cast<std::uint32_t>(r_.target_.off + start),
                static_cast<std::uint32_t>(path_end - start)};
}

} // namespace sluice::detail
