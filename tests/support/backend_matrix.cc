#include "support/backend_matrix.h"

#include <string>
#include <utility>
#include <vector>

#include "support/test_certs.h"

namespace sluice::test {

void PrintTo(const backend_param& p, std::ostream* os) {
    *os << p.backend << (p.dispatch == dispatch_mode::pool ? "/pool" : "/inline")
        << (p.wire == wire::tls ? "/tls" : "");
}

std::vector<backend_param> backend_matrix() {
    std::vector<backend_param> out;
    for (const io::backend* b : io::registered_backends()) {
        for (const wire w : {wire::plain, wire::tls}) {
            out.push_back({std::string(b->name), dispatch_mode::inline_io, w});
            out.push_back({std::string(b->name), dispatch_mode::pool, w});
        }
    }
    return out;
}

std::vector<backend_param> tls_backend_matrix() {
    std::vector<backend_param> out;
    for (backend_param& p : backend_matrix()) {
        if (p.wire == wire::tls) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

std::vector<backend_param> backend_matrix_of(std::string_view backend) {
    std::vector<backend_param> out;
    for (backend_param& p : backend_matrix()) {
        if (p.backend == backend) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

std::string backend_param_name(const testing::TestParamInfo<backend_param>& info) {
    return info.param.backend + (info.param.dispatch == dispatch_mode::pool ? "_pool" : "_inline") +
           (info.param.wire == wire::tls ? "_tls" : "");
}

const io::backend* find_backend(std::string_view name) noexcept {
    for (const io::backend* b : io::registered_backends()) {
        if (b->name == name) {
            return b;
        }
    }
    return nullptr;
}

std::string backend_unavailable_reason(std::string_view name) {
    const io::backend* b = find_backend(name);
    if (b == nullptr) {
        return "backend \"" + std::string(name) + "\" is not registered";
    }
    return b->probe(io::driver_options{});
}

void backend_test::SetUp() {
    const std::string why = backend_unavailable_reason(GetParam().backend);
    if (!why.empty()) {
        GTEST_SKIP() << "backend " << GetParam().backend << " cannot run here: " << why;
    }
    server_ = make_server();
}

std::unique_ptr<test_server> backend_test::make_server() const {
    auto s = std::make_unique<test_server>(GetParam().backend, GetParam().dispatch);
    if (GetParam().wire == wire::tls) {
        // The TLS driver wraps the backend's: every case written for plaintext runs over it.
        s->config().tls.cert = shared_test_certs().cert_path();
        s->config().tls.key = shared_test_certs().key_path();
    }
    return s;
}

void backend_test::TearDown() {
    // Stop first: suspended exchanges end (their listeners may still record into members),
    // then the helper threads finish, then everything is destroyed.
    if (server_) {
        server_->stop();
    }
    bg_.join();
    server_.reset();
}

bool backend_test::connection_per_thread() const noexcept {
    const io::backend* b = find_backend(GetParam().backend);
    return b != nullptr && b->traits.connection_per_thread;
}

std::optional<http_response> backend_test::fetch(std::string_view target) {
    test_client c(srv().port());
    EXPECT_TRUE(c.send(get_request(target))) << c.error();
    auto r = c.read_response();
    EXPECT_TRUE(r) << target << ": " << c.error();
    return r;
}

} // namespace sluice::test
