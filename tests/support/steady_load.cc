#include "support/steady_load.h"

#include "support/http_response.h"
#include "support/test_client.h"

namespace sluice::test {

steady_load::steady_load(std::uint16_t port, std::string target, int clients)
    : port_(port), target_(std::move(target)) {
    for (int i = 0; i < clients; ++i) {
        threads_.emplace_back([this] { run(); });
    }
}

steady_load::~steady_load() {
    stop();
}

void steady_load::stop() {
    stop_ = true;
    for (auto& t : threads_) {
        if (t.joinable()) {
            t.join();
        }
    }
}

std::string steady_load::failures() const {
    std::lock_guard lock(mu_);
    return failures_;
}

void steady_load::run() {
    while (!stop_) {
        test_client c(port_, std::chrono::milliseconds(5'000));
        if (!c.connected()) {
            fail("connect: " + c.error());
            continue;
        }
        for (int i = 0; i < 20 && !stop_; ++i) {
            if (!c.send(get_request(target_))) {
                fail("send: " + c.error());
                break;
            }
            auto r = c.read_response();
            if (!r || r->status != 200) {
                fail(r ? "status " + std::to_string(r->status) : "read: " + c.error());
                break;
            }
            ++answered_;
            if (!r->body.empty()) {
                ++by_first_[static_cast<unsigned char>(r->body[0])];
            }
            const auto conn = r->header("Connection");
            if (conn && same_name(*conn, "close")) {
                break;
            }
        }
    }
}

void steady_load::fail(const std::string& why) {
    std::lock_guard lock(mu_);
    if (failures_.size() < 4000) {
        failures_ += why + "\n";
    }
}

} // namespace sluice::test
