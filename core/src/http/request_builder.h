// The one way the core fills a request (a friend of sluice::request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <sluice/request.h>

namespace sluice::detail {

class request_builder {
public:
    explicit request_builder(request& r) noexcept : r_(r) {}

    // The parser's way (server_session): the head's bytes go into the arena in bulk, as
    // received (append_head), and its fields are marked as ranges of them (extend_*), so a
    // field costs no copy of its own. Offsets are the arena's; a field's pieces are adjacent,
    // so each call extends it at its end.
    void append_head(std::string_view bytes) { r_.arena_.append(bytes); }
    void extend_method(std::size_t off, std::size_t n) noexcept { extend(r_.method_, off, n); }
    void extend_target(std::size_t off, std::size_t n) noexcept { extend(r_.target_, off, n); }
    void extend_header_name(std::size_t off, std::size_t n) noexcept {
        extend(r_.headers_.back().first, off, n);
    }
    void extend_header_value(std::size_t off, std::size_t n) noexcept {
        extend(r_.headers_.back().second, off, n);
    }
    struct range {
        std::size_t off = 0;
        std::size_t len = 0;
    };
    /// The last header's name and value, as arena ranges (begin_header must have run).
    range last_header_name() const noexcept { return to_range(r_.headers_.back().first); }
    range last_header_value() const noexcept { return to_range(r_.headers_.back().second); }
    /// Shortens the last header's value to its first `len` bytes (trailing whitespace).
    void truncate_last_header_value(std::size_t len) noexcept {
        r_.headers_.back().second.len = static_cast<std::uint32_t>(len);
    }
    std::string_view arena_view(range r) const noexcept { return {r_.arena_.data() + r.off, r.len}; }
    std::size_t method_size() const noexcept { return r_.method_.len; }
    /// Forgets the method, target and headers (their bytes could not be stored).
    void drop_head() noexcept;

    // The piecewise way, for a request built without a parser (tests, tools): each piece is
    // copied into the arena. Appends to the method / target.
    void append_method(std::string_view piece);
    void append_target(std::string_view piece);
    /// A new header starts with its first name piece; the following pieces extend it.
    void begin_header();
    void append_header_name(std::string_view piece);
    void append_header_value(std::string_view piece);
    /// Trims optional whitespace at the end of the last header value (llhttp keeps it).
    void finish_header();
    void append_body(std::string_view piece) { r_.body_.append(piece); }
    /// Moves the body out (exchange::take_body).
    std::string take_body() noexcept { return std::exchange(r_.body_, std::string()); }
    void set_version(http_version v) noexcept { r_.version_ = v; }
    void set_keep_alive(bool k) noexcept { r_.keep_alive_ = k; }
    void set_remote_address(std::string_view a) { r_.remote_address_.assign(a); }
    /// The connection's TLS description (null: plaintext); a reference count, no copy.
    void set_tls(const std::shared_ptr<const tls_info>& t) noexcept { r_.tls_ = t; }
    /// Computes the path and query from the target; call once the target is complete.
    void finish_target();
    /// Stores the decoded path parameters; false if one has a malformed escape.
    template <class Params>
    bool set_path_params(const Params& params);

    std::size_t arena_size() const noexcept { return r_.arena_.size(); }
    std::size_t target_size() const noexcept { return r_.target_.len; }

private:
    void append(request::slice& s, std::string_view piece);
    static void extend(request::slice& s, std::size_t off, std::size_t n) noexcept {
        if (s.len == 0) {
            s.off = static_cast<std::uint32_t>(off);
        }
        s.len += static_cast<std::uint32_t>(n);
    }
    static range to_range(request::slice s) noexcept { return {s.off, s.len}; }
    request& r_;
};

template <class Params>
bool request_builder::set_path_params(const Params& params) {
    r_.path_params_.clear();
    r_.params_.clear();
    for (const auto& p : params) {
        auto decoded = percent_decode(p.value);
        if (!decoded) {
            return false;
        }
        request::slice s{static_cast<std::uint32_t>(r_.params_.size()),
                         static_cast<std::uint32_t>(decoded->size())};
        r_.params_.append(*decoded);
        r_.path_params_.emplace_back(p.name, s);
    }
    return true;
}

} // namespace sluice::detail
