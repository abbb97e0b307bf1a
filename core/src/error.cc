// The error category of exchange_errc.

#include <string>

#include <sluice/error.h>

namespace sluice {
namespace {

class exchange_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "sluice.exchange"; }

    std::string message(int value) const override {
        switch (static_cast<exchange_errc>(value)) {
        case exchange_errc::client_disconnected:
            return "client disconnected";
        case exchange_errc::write_failed:
            return "writing the response failed";
        case exchange_errc::timed_out:
            return "async timeout expired";
        case exchange_errc::shutting_down:
            return "server shutting down";
        case exchange_errc::handler_threw:
            return "handler threw an exception";
        case exchange_errc::content_length_mismatch:
            return "streamed body does not match its declared Content-Length";
        }
        return "unknown exchange error " + std::to_string(value);
    }
};

} // namespace

const std::error_category& exchange_category() noexcept {
    // A function-local static: one category object, so error_code comparisons by address work,
    // built on first use without any start-up order between translation units.
    static const exchange_category_impl category;
    return category;
}

} // namespace sluice
