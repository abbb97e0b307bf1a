// sluice::client: not implemented yet; every call fails with cancelled (API placeholder).
#include <sluice/client.h>
#include <sluice/request.h>

namespace sluice {

namespace detail {
class client_core {
public:
    client_options options;
};
class client_call_state {};
} // namespace detail

std::optional<std::string_view> client_response::header(std::string_view name) const noexcept {
    for (const auto& h : headers) {
        if (iequals(h.name, name)) {
            return std::string_view(h.value);
        }
    }
    return std::nullopt;
}

bool client_call::cancel() const noexcept {
    return false;
}

client::client(upstream, client_options options) : core_(std::make_shared<detail::client_core>()) {
    core_->options = options;
}

client::~client() = default;

client_call client::send(const executor& on, client_request, client_callback done) {
    on.post([done = std::move(done)] { done(result<client_response>(client_errc::cancelled)); });
    return {};
}

async_op<client_response> client::async_send(const executor&, client_request) {
    return async_op<client_response>(
        [](completion<client_response> done) { done(result<client_response>(client_errc::cancelled)); });
}

result<client_response> client::send_blocking(client_request) {
    return result<client_response>(client_errc::cancelled);
}

client_stats client::stats() const noexcept {
    return {};
}

const client_options& client::options() const noexcept {
    return core_->options;
}

} // namespace sluice
