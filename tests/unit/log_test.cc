// The logger: level filtering, custom sinks, and the default stderr sink's one-line format.

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sluice/log.h>

namespace sluice {
namespace {

/// Redirects fd 2 into a pipe for the lifetime of the object; text() reads what was written.
class stderr_capture {
public:
    stderr_capture() {
        EXPECT_EQ(::pipe(fds_.data()), 0);
        saved_ = ::dup(STDERR_FILENO);
        ::dup2(fds_[1], STDERR_FILENO);
    }
    ~stderr_capture() {
        restore();
        ::close(fds_[0]);
    }
    stderr_capture(const stderr_capture&) = delete;
    stderr_capture& operator=(const stderr_capture&) = delete;

    std::string text() {
        restore();
        std::string out;
        std::array<char, 4096> buf{};
        ssize_t n = 0;
        while ((n = ::read(fds_[0], buf.data(), buf.size())) > 0) {
            out.append(buf.data(), static_cast<std::size_t>(n));
        }
        return out;
    }

private:
    void restore() {
        if (saved_ >= 0) {
            ::dup2(saved_, STDERR_FILENO);
            ::close(saved_);
            ::close(fds_[1]);
            saved_ = -1;
        }
    }
    std::array<int, 2> fds_ = {-1, -1};
    int saved_ = -1;
};

TEST(log, level_names) {
    EXPECT_EQ(to_string(log_level::error), "error");
    EXPECT_EQ(to_string(log_level::warn), "warn");
    EXPECT_EQ(to_string(log_level::info), "info");
    EXPECT_EQ(to_string(log_level::debug), "debug");
    EXPECT_EQ(to_string(static_cast<log_level>(99)), "unknown");
}

TEST(log, sink_receives_formatted_messages_at_or_above_the_level) {
    std::vector<std::pair<log_level, std::string>> seen;
    const logger log(log_level::warn, [&](log_level l, std::string_view m) { seen.emplace_back(l, m); });
    log.error("e {}", 1);
    log.warn("w {}", "two");
    log.info("i");
    log.debug("d");
    log.write(log_level::info, "raw info");
    log.write(log_level::error, "raw error");
    ASSERT_EQ(seen.size(), 3U);
    EXPECT_EQ(seen[0], std::pair(log_level::error, std::string("e 1")));
    EXPECT_EQ(seen[1], std::pair(log_level::warn, std::string("w two")));
    EXPECT_EQ(seen[2], std::pair(log_level::error, std::string("raw error")));
    EXPECT_TRUE(log.enabled(log_level::warn));
    EXPECT_FALSE(log.enabled(log_level::info));
}

TEST(log, empty_sink_discards) {
    const logger quiet(log_level::debug, logger::sink{});
    stderr_capture capture;
    quiet.error("nothing {}", 1);
    EXPECT_EQ(capture.text(), "");
}

TEST(log, default_sink_writes_one_line_to_stderr) {
    const logger log(log_level::info);
    stderr_capture capture;
    log.warn("listening on {}:{}", "127.0.0.1", 8080);
    log.debug("not shown");
    log.info("path /a\nsluice error: forged\r");
    EXPECT_EQ(capture.text(), "sluice warn: listening on 127.0.0.1:8080\n"
                              "sluice info: path /a\\x0asluice error: forged\\x0d\n");
}

TEST(log, concurrent_lines_do_not_interleave) {
    const logger log(log_level::info);
    constexpr int threads = 4;
    constexpr int lines = 200; // 4 * 200 short lines stay well inside a pipe's 64 KiB buffer
    stderr_capture capture;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&log, t] {
            for (int i = 0; i < lines; ++i) {
                log.info("thread {} line {} {}", t, i, std::string(20, static_cast<char>('a' + t)));
            }
        });
    }
    for (auto& th : pool) {
        th.join();
    }
    const std::string text = capture.text();
    std::set<std::string> expected;
    for (int t = 0; t < threads; ++t) {
        for (int i = 0; i < lines; ++i) {
            expected.insert("sluice info: thread " + std::to_string(t) + " line " + std::to_string(i) + " " +
                            std::string(20, static_cast<char>('a' + t)));
        }
    }
    std::set<std::string> got;
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t end = text.find('\n', start);
        ASSERT_NE(end, std::string::npos);
        got.insert(text.substr(start, end - start));
        start = end + 1;
    }
    EXPECT_EQ(got, expected);
}

} // namespace
} // namespace sluice
