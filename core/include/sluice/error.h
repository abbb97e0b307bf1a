// Errors at the API boundary: startup errors that name the config key, and the
// std::error_code category for exchange and I/O failures.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace sluice {

/// Thrown when a configuration value is unknown or invalid, or the server cannot start.
/// key() names the configuration key at fault ("listen", "backend", "limits.max_body_bytes"),
/// or is empty when no single key is to blame.
class startup_error : public std::runtime_error {
public:
    startup_error(std::string key, const std::string& message)
        : std::runtime_error(key.empty() ? message : key + ": " + message), key_(std::move(key)),
          reason_(message) {}

    const std::string& key() const noexcept { return key_; }
    /// The message without the key: what to say when rethrowing under another key.
    const std::string& reason() const noexcept { return reason_; }

private:
    std::string key_;
    std::string reason_;
};

/// Why an exchange ended without a normal completion, as seen by async listeners.
enum class exchange_errc {
    client_disconnected = 1, ///< the peer closed or reset the connection
    write_failed,            ///< sending the response failed
    timed_out,               ///< the async timeout expired
    shutting_down,           ///< the server stopped while the exchange was suspended
    handler_threw,           ///< the handler threw an exception
    content_length_mismatch, ///< a stream wrote more or fewer bytes than response::content_length()
};

const std::error_category& exchange_category() noexcept;

inline std::error_code make_error_code(exchange_errc e) noexcept {
    return {static_cast<int>(e), exchange_category()};
}

} // namespace sluice

template <>
struct std::is_error_code_enum<sluice::exchange_errc> : std::true_type {};
