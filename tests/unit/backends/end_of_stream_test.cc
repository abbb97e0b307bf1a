// How the drivers tell the end of a stream (backend.h rule 6), as the client transport
// relies on it (client/transport.cc): a hang-up heard while paused comes before the bytes still
// unread ahead of the FIN, and receiving again after an end of stream reports it once more, so
// a transport that reads past a report it cannot trust gets the bytes, then the end, and never
// waits for an edge that will not come.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <sluice/backend.h>

#include "server/socket_util.h"
#include "support/backend_matrix.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

/// One accepted loopback connection that the driver receives on (`served`), and its client.
class stream_pair {
public:
    explicit stream_pair(io::driver& d) : d_(d) {
        const int l =
            detail::open_listener(detail::resolve_listen_address("127.0.0.1:0"), detail::reuse_port::no, 16);
        if (l < 0) {
            return;
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(detail::bound_port(l));
        client_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (client_ >= 0 && ::connect(client_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
            served_ = ::accept4(l, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        }
        ::close(l);
    }
    ~stream_pair() {
        if (served_ >= 0) {
            d_.close(served_, &owner_);
            std::vector<io::completion> out;
            for (int i = 0; i < 20 && !closed_; ++i) {
                out.clear();
                d_.wait(5ms, out);
                for (const io::completion& c : out) {
                    closed_ = closed_ || c.kind == io::op::close;
                    if (c.buffer != io::no_buffer) {
                        d_.release(c.buffer);
                    }
                }
            }
        }
        if (client_ >= 0) {
            ::close(client_);
        }
    }
    stream_pair(const stream_pair&) = delete;
    stream_pair& operator=(const stream_pair&) = delete;

    bool ok() const noexcept { return served_ >= 0; }
    int served() const noexcept { return served_; }
    void* owner() noexcept { return &owner_; }
    bool send(const std::string& bytes) const {
        return ::send(client_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
               static_cast<ssize_t>(bytes.size());
    }
    bool fin() const { return ::shutdown(client_, SHUT_WR) == 0; }

    /// Waits (2 s at most) for a recv completion with more == false, appending the bytes read
    /// before it to `bytes`, and gives its result, or 1 when none came. With `enough`, stops as
    /// soon as `bytes` holds that many, final or not.
    int receive(std::string& bytes, std::size_t enough = std::string::npos) {
        std::vector<io::completion> out;
        const auto until = std::chrono::steady_clock::now() + 2s;
        while (std::chrono::steady_clock::now() < until) {
            out.clear();
            d_.wait(50ms, out);
            int final = 1;
            for (const io::completion& c : out) {
                if (c.kind == io::op::recv && c.result > 0) {
                    bytes.append(c.data, static_cast<std::size_t>(c.result));
                }
                if (c.buffer != io::no_buffer) {
                    d_.release(c.buffer);
                }
                if (c.kind == io::op::recv && !c.more && final == 1) {
                    final = c.result;
                }
            }
            if (bytes.size() >= enough || final != 1) {
                return final;
            }
        }
        return 1;
    }

private:
    io::driver& d_;
    int client_ = -1;
    int served_ = -1;
    int owner_ = 0;
    bool closed_ = false;
};

/// Runs `body` on every backend with a fresh driver and a fresh pair on it.
template <class Body>
void on_every_backend(Body body) {
    for (const std::string name : {"blocking", "epoll", "uring"}) {
        SCOPED_TRACE(name);
        ASSERT_EQ(backend_unavailable_reason(name), "");
        std::string error;
        auto d = find_backend(name)->create(io::driver_options{}, error);
        ASSERT_NE(d, nullptr) << error;
        stream_pair p(*d);
        ASSERT_TRUE(p.ok());
        body(*d, p);
    }
}

TEST(end_of_stream, receiving_again_after_the_end_hears_it_again) {
    on_every_backend([](io::driver& d, stream_pair& p) {
        ASSERT_TRUE(p.send("abc"));
        ASSERT_TRUE(p.fin());
        ASSERT_EQ(d.recv(p.served(), p.owner()), 0);
        std::string bytes;
        EXPECT_EQ(p.receive(bytes), 0);
        EXPECT_EQ(bytes, "abc");
        ASSERT_EQ(d.recv(p.served(), p.owner()), 0);
        bytes.clear();
        EXPECT_EQ(p.receive(bytes), 0)
            << "no second end of stream: a re-arm after the end would wait forever";
        EXPECT_EQ(bytes, "");
    });
}

TEST(end_of_stream, a_hang_up_heard_while_paused_comes_before_the_unread_bytes) {
    on_every_backend([](io::driver& d, stream_pair& p) {
        ASSERT_EQ(d.recv(p.served(), p.owner()), 0);
        ASSERT_TRUE(p.send("head"));
        std::string bytes;
        p.receive(bytes, 4);
        ASSERT_EQ(bytes, "head");
        d.pause_recv(p.served(), p.owner());
        bytes.clear();
        EXPECT_EQ(p.receive(bytes), -ECANCELED); // the pause's own final completion
        // Now the rest and the FIN, while paused: the hang-up is told, the bytes are not read.
        ASSERT_TRUE(p.send("tail"));
        ASSERT_TRUE(p.fin());
        EXPECT_EQ(p.receive(bytes), 0);
        EXPECT_EQ(bytes, "") << "nothing is read while paused";
        // Receiving again gives what came ahead of the FIN, then the end once more.
        ASSERT_EQ(d.recv(p.served(), p.owner()), 0);
        EXPECT_EQ(p.receive(bytes), 0);
        EXPECT_EQ(bytes, "tail");
    });
}

// The client's pace on a long body: a pause after every read, receiving again once the pause's
// final completion came, with the whole body and the FIN already waiting in the socket. Every
// byte the driver took from the socket reaches its owner, however the cancellations race the
// reads. (A body up to 30 KiB short behind a FIN was looked for here first: the drivers lose
// nothing; the loss was a paused hang-up taken as the end, loop/paused_hang_up.h.)
TEST(end_of_stream, pausing_after_every_read_loses_nothing_ahead_of_the_fin) {
    constexpr std::size_t total = std::size_t{1} << 20;
    for (const std::string name : {"blocking", "epoll", "uring"}) {
        SCOPED_TRACE(name);
        ASSERT_EQ(backend_unavailable_reason(name), "");
        std::string error;
        io::driver_options o;
        o.recv_buffer_count = 64; // as the client's own loop (client_core.cc)
        auto d = find_backend(name)->create(o, error);
        ASSERT_NE(d, nullptr) << error;
        for (int round = 0; round < 20; ++round) {
            stream_pair p(*d);
            ASSERT_TRUE(p.ok());
            std::string body(total, 'x');
            ASSERT_TRUE(p.send(body)); // fits in the two sockets' buffers on loopback
            ASSERT_TRUE(p.fin());
            std::size_t got = 0;
            bool paused = false;
            bool ended = false;
            ASSERT_EQ(d->recv(p.served(), p.owner()), 0);
            const auto until = std::chrono::steady_clock::now() + 5s;
            std::vector<io::completion> out;
            while (!ended && std::chrono::steady_clock::now() < until) {
                out.clear();
                d->wait(20ms, out);
                bool data = false;
                bool final_seen = false;
                int final = 1;
                for (const io::completion& c : out) {
                    if (c.kind == io::op::recv && c.result > 0) {
                        got += static_cast<std::size_t>(c.result);
                        data = true;
                    }
                    if (c.buffer != io::no_buffer) {
                        d->release(c.buffer);
                    }
                    if (c.kind == io::op::recv && !c.more) {
                        final_seen = true;
                        final = c.result;
                    }
                }
                if (final_seen) {
                    // A 0 right after a pause may be the hang-up heard while paused: the end
                    // is the one a fresh receive reports with nothing more to give.
                    ended = final == 0 && !paused && !data;
                    paused = false;
                    if (!ended) {
                        ASSERT_EQ(d->recv(p.served(), p.owner()), 0);
                    }
                } else if (data && !paused) {
                    d->pause_recv(p.served(), p.owner());
                    paused = true;
                }
            }
            EXPECT_TRUE(ended) << "round " << round;
            ASSERT_EQ(got, total) << "round " << round;
        }
    }
}

} // namespace
} // namespace sluice::test
