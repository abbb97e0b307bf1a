// Fills a request from llhttp's pieces: every byte goes into the request's arena and
// fields are (offset, length) slices of it, so a warmed-up request allocates nothing.
#include "http/request_builder.h"

#include <cstdint>
#include <string_view>

namespace sluice::detail {

namespace {

bool is_ows(char c) noexcept {
    return c == ' ' || c == '\t';
}

} // namespace

// llhttp delivers a field in pieces (one per span, split wherever a read ended), but
// the pieces of one field arrive back to back and nothing else is appended in between,
// so a slice only ever grows at the end of the arena.
void request_builder::append(request::slice& s, std::string_view piece) {
    if (s.len == 0) {
        s.off = static_cast<std::uint32_t>(r_.arena_.size());
    }
    r_.arena_.append(piece);
    s.len += static_cast<std::uint32_t>(piece.size());
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
void request_builder::finish_target() noexcept {
    const std::string_view t = r_.target();
    const std::size_t q = t.find('?');
    r_.path_len_ = static_cast<std::uint32_t>(q == std::string_view::npos ? t.size() : q);
}

} // namespace sluice::detail
