// The error category of client_errc.

#include <string>

#include <sluice/client.h>

namespace sluice {

namespace {

class client_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "sluice.client"; }

    std::string message(int value) const override {
        switch (static_cast<client_errc>(value)) {
        case client_errc::refused:
            return "upstream refused the connection";
        case client_errc::connect_timed_out:
            return "connecting to the upstream timed out";
        case client_errc::response_timed_out:
            return "upstream response timed out";
        case client_errc::pool_exhausted:
            return "upstream connection pool exhausted";
        case client_errc::acquire_timed_out:
            return "waiting for an upstream connection timed out";
        case client_errc::reset:
            return "upstream closed the connection";
        case client_errc::malformed_response:
            return "malformed upstream response";
        case client_errc::response_too_large:
            return "upstream response too large";
        case client_errc::cancelled:
            return "upstream call cancelled";
        case client_errc::invalid_request:
            return "request cannot be sent upstream";
        case client_errc::tls_handshake_failed:
            return "TLS handshake with the upstream failed";
        case client_errc::tls_certificate_rejected:
            return "upstream TLS certificate rejected";
        }
        return "unknown client error " + std::to_string(value);
    }
};

} // namespace

std::string_view client_errc_name(client_errc e) noexcept {
    switch (e) {
    case client_errc::refused:
        return "refused";
    case client_errc::connect_timed_out:
        return "connect_timed_out";
    case client_errc::response_timed_out:
        return "response_timed_out";
    case client_errc::pool_exhausted:
        return "pool_exhausted";
    case client_errc::acquire_timed_out:
        return "acquire_timed_out";
    case client_errc::reset:
        return "reset";
    case client_errc::malformed_response:
        return "malformed_response";
    case client_errc::response_too_large:
        return "response_too_large";
    case client_errc::cancelled:
        return "cancelled";
    case client_errc::invalid_request:
        return "invalid_request";
    case client_errc::tls_handshake_failed:
        return "tls_handshake_failed";
    case client_errc::tls_certificate_rejected:
        return "tls_certificate_rejected";
    }
    return {};
}

const std::error_category& client_category() noexcept {
    static const client_category_impl category;
    return category;
}

} // namespace sluice
