// Zero-downtime restart (docs/operations.md): a server started with the handover_socket of a
// running one takes over its listening sockets; the old one drains and stops; clients that
// keep sending meanwhile see no refused, reset or unanswered request. And every way the
// hand-over can go wrong ends, within a deadline, in a startup error naming handover_socket
// or in a bind, never in a hang or in an old server that stops serving.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>
#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/steady_load.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

std::string fresh_socket_path() {
    static std::atomic<int> n{0};
    return "/tmp/sluice-ho-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
}

class handover_test : public backend_test {
protected:
    void TearDown() override {
        load_.reset();
        for (auto& s : others_) {
            s->stop();
        }
        backend_test::TearDown();
        others_.clear();
        ::unlink(path_.c_str());
    }

    void configure(test_server& s, char who) {
        s.config().handover_socket = path_;
        s.config().shutdown_timeout_ms = 2'000;
        s.config().blocking.threads = 16;
        s.route("GET", "/who", [who](exchange& ex) { ex.response().text(std::string(1, who)); });
    }

    test_server& another(char who) {
        others_.push_back(make_server());
        configure(*others_.back(), who);
        return *others_.back();
    }

    // True once the server has stopped on its own (after handing over), within the deadline.
    bool stops_by_itself(test_server& s, milliseconds timeout = milliseconds(10'000)) {
        auto done = std::make_shared<std::atomic<bool>>(false);
        bg_.run([&s, done] {
            s.server().wait();
            *done = true;
        });
        return wait_until([&] { return done->load(); }, timeout);
    }

    std::string path_ = fresh_socket_path();
    std::vector<std::unique_ptr<test_server>> others_;
    std::unique_ptr<steady_load> load_;
};

TEST_P(handover_test, a_new_server_takes_the_port_over_without_a_failed_request) {
    configure(srv(), 'A');
    srv().start();
    const std::uint16_t port = srv().port();
    load_ = std::make_unique<steady_load>(port, "/who", 3);
    ASSERT_TRUE(wait_until([&] { return load_->answered() >= 50; })) << load_->failures();

    // An idle keep-alive connection of the old server: its next request must be answered.
    test_client idle(port);
    ASSERT_TRUE(idle.send(get_request("/who"))) << idle.error();
    auto first = idle.read_response();
    ASSERT_TRUE(first) << idle.error();

    test_server& b = another('B');
    b.start();
    EXPECT_EQ(b.port(), port);
    EXPECT_TRUE(b.log().contains("adopted")) << "B bound instead of taking over";

    ASSERT_TRUE(idle.send(get_request("/who"))) << idle.error();
    auto second = idle.read_response();
    ASSERT_TRUE(second) << "an idle connection of the old server was dropped: " << idle.error();
    EXPECT_EQ(second->body, first->body);
    // The old server closes it: after this response (Connection: close) if its drain had begun
    // when the request came, else when the drain ends (shutdown_timeout_ms, then 1 s).
    if (!second->says_close()) {
        idle.set_timeout(milliseconds(5'000));
    }
    EXPECT_TRUE(idle.wait_closed()) << idle.error();

    EXPECT_TRUE(stops_by_itself(srv())) << "the old server did not stop after handing over";
    EXPECT_FALSE(srv().server().ready());
    const std::uint64_t by_b = load_->answered_by('B');
    ASSERT_TRUE(wait_until([&] { return load_->answered_by('B') >= by_b + 50; })) << load_->failures();
    load_->stop();
    EXPECT_EQ(load_->failures(), "");
    EXPECT_GT(load_->answered_by('A'), 0u);
    EXPECT_TRUE(srv().log().contains("taken over; draining"));
}

// Filling the accept queue needs an I/O loop a handler can hold: inline dispatch on a reactor
// backend. Pool dispatch and the blocking runtime have no such loop, so this case is made only
// for the rows that have one (not skipped on the others).
std::vector<backend_param> loop_holding_rows() {
    std::vector<backend_param> rows;
    for (const backend_param& p : backend_matrix()) {
        const io::backend* b = find_backend(p.backend);
        if (p.dispatch == dispatch_mode::inline_io && b != nullptr && !b->traits.connection_per_thread) {
            rows.push_back(p);
        }
    }
    return rows;
}

class handover_queue_test : public handover_test {};

TEST_P(handover_queue_test, connections_waiting_in_the_accept_queue_are_answered) {
    auto held = std::make_shared<std::atomic<int>>(0); // 1: the handler holds the loop; 2: let go
    configure(srv(), 'A');
    srv().route("GET", "/hold", [held](exchange& ex) {
        *held = 1;
        wait_until([&] { return held->load() == 2; }, milliseconds(5'000));
        ex.response().text("held");
    });
    srv().start();
    test_client holder(srv().port());
    ASSERT_TRUE(holder.send(get_request("/hold"))) << holder.error();
    ASSERT_TRUE(wait_until([&] { return held->load() == 1; }));
    // The old server's only loop is busy: these wait in the kernel's accept queue (or, with
    // io_uring, are accepted by the kernel for a loop that cannot look). Plaintext ones have
    // their request queued too; a TLS one cannot (its handshake needs the held loop, and would
    // wait out the hold), so it sends once the loop is free: after the hand-over.
    std::vector<std::unique_ptr<test_client>> waiting;
    for (int i = 0; i < 20; ++i) {
        waiting.push_back(std::make_unique<test_client>(
            srv().port(), default_timeout, client_transport::automatic, client_handshake::on_first_io));
        ASSERT_TRUE(waiting.back()->connected()) << waiting.back()->error();
        if (!over_tls()) {
            ASSERT_TRUE(waiting.back()->send(get_request("/who"))) << waiting.back()->error();
        }
    }
    test_server& b = another('B');
    b.start();
    *held = 2;
    for (auto& c : waiting) {
        if (over_tls()) {
            ASSERT_TRUE(c->send(get_request("/who"))) << c->error();
        }
        auto r = c->read_response();
        ASSERT_TRUE(r) << "a queued connection was dropped: " << c->error();
        EXPECT_EQ(r->status, 200);
    }
    auto r = holder.read_response();
    ASSERT_TRUE(r) << holder.error();
    EXPECT_EQ(r->body, "held");
    EXPECT_TRUE(stops_by_itself(srv()));
}

TEST_P(handover_test, a_new_server_that_fails_to_start_leaves_the_old_one_serving) {
    configure(srv(), 'A');
    srv().start();
    // Another address than the one handed over: the new server must refuse the sockets.
    test_server& wrong = another('B');
    wrong.config().listen = "127.0.0.1:" + std::to_string(srv().port() == 65535 ? 1 : srv().port() + 1);
    try {
        wrong.start();
        FAIL() << "a server configured for another port accepted the handed-over sockets";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "handover_socket");
        EXPECT_NE(std::string(e.what()).find("listens on"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(srv().log().wait_for("still serving")) << "the old server logs the failed hand-over";
    EXPECT_TRUE(srv().server().ready());
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/who"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "A");
    c.close_clean(); // an idle connection would keep the old server until its drain ends
    // And the hand-over still works afterwards.
    test_server& b = another('B');
    b.start();
    EXPECT_EQ(b.port(), srv().port());
    EXPECT_TRUE(stops_by_itself(srv()));
}

TEST_P(handover_test, the_admin_listener_is_handed_over_too) {
    configure(srv(), 'A');
    srv().config().admin.listen = "127.0.0.1:0";
    srv().start();
    const std::uint16_t admin = srv().server().admin_port();
    ASSERT_NE(admin, 0);
    test_server& b = another('B');
    b.config().admin.listen = "127.0.0.1:0";
    b.start();
    EXPECT_EQ(b.server().admin_port(), admin);
    EXPECT_TRUE(stops_by_itself(srv()));
    test_client c(admin);
    ASSERT_TRUE(c.send(get_request("/readyz"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200) << r->body;
}

TEST_P(handover_test, a_restart_chain_keeps_the_port_and_the_path) {
    configure(srv(), 'A');
    srv().start();
    const std::uint16_t port = srv().port();
    test_server* previous = &srv();
    for (int i = 0; i < 3; ++i) {
        test_server& next = another(i % 2 == 0 ? 'B' : 'A');
        next.start();
        EXPECT_EQ(next.port(), port);
        EXPECT_TRUE(stops_by_itself(*previous)) << "restart " << i;
        previous = &next;
    }
    test_client c(port);
    ASSERT_TRUE(c.send(get_request("/who"))) << c.error();
    EXPECT_TRUE(c.read_response()) << c.error();
}

// A peer on the hand-over socket that is not a sluice server, scripted on a thread.
class fake_old_server {
public:
    enum class script { send_garbage, close_at_once };

    fake_old_server(const std::string& path, script s, background& bg) {
        fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
        ::unlink(path.c_str());
        EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
        EXPECT_EQ(::listen(fd_, 4), 0);
        bg.run([this, s] {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 5'000) != 1) {
                return;
            }
            const int c = ::accept(fd_, nullptr, nullptr);
            if (c >= 0 && s == script::send_garbage) {
                ::send(c, "hello", 5, MSG_NOSIGNAL);
                ::poll(&p, 0, 200); // let the peer read it before the close
            }
            if (c >= 0) {
                ::close(c);
            }
        });
    }
    ~fake_old_server() { ::close(fd_); }

private:
    int fd_ = -1;
};

TEST_P(handover_test, a_peer_that_is_not_a_sluice_server_is_a_startup_error) {
    fake_old_server fake(path_, fake_old_server::script::send_garbage, bg_);
    configure(srv(), 'A');
    const auto t0 = std::chrono::steady_clock::now();
    try {
        srv().start();
        FAIL() << "started after a garbage hand-over";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "handover_socket");
        EXPECT_NE(std::string(e.what()).find("not a sluice server"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(5'000));
    bg_.join();
}

TEST_P(handover_test, an_old_server_gone_before_sending_means_binding) {
    fake_old_server fake(path_, fake_old_server::script::close_at_once, bg_);
    configure(srv(), 'A');
    srv().start();
    EXPECT_TRUE(srv().log().contains("binding"));
    EXPECT_NE(srv().port(), 0);
    bg_.join();
}

TEST_P(handover_test, a_stale_socket_is_replaced_and_a_file_is_refused) {
    {
        // A socket file nobody listens on (a server that was killed).
        const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
        ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
        ::close(fd);
    }
    configure(srv(), 'A');
    srv().start();
    EXPECT_TRUE(srv().log().contains("stale"));
    test_server& b = another('B');
    b.start();
    EXPECT_EQ(b.port(), srv().port()) << "the replaced path answers hand-overs";
    EXPECT_TRUE(stops_by_itself(srv()));
    b.stop();

    const std::string file = path_ + ".txt";
    std::ofstream(file) << "not a socket";
    test_server& c = another('C');
    c.config().handover_socket = file;
    try {
        c.start();
        FAIL() << "a regular file was taken for the hand-over socket";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "handover_socket");
        EXPECT_NE(std::string(e.what()).find("not a socket"), std::string::npos) << e.what();
    }
    std::ifstream kept(file);
    std::string text;
    std::getline(kept, text);
    EXPECT_EQ(text, "not a socket") << "the file was left alone";
    ::unlink(file.c_str());
}

TEST_P(handover_test, a_stopped_server_removes_its_socket) {
    configure(srv(), 'A');
    srv().start();
    EXPECT_EQ(::access(path_.c_str(), F_OK), 0);
    srv().stop();
    EXPECT_NE(::access(path_.c_str(), F_OK), 0);
}

SLUICE_BACKEND_SUITE(handover_test);
INSTANTIATE_TEST_SUITE_P(backends, handover_queue_test, ::testing::ValuesIn(loop_holding_rows()),
                         backend_param_name);

} // namespace
} // namespace sluice::test
