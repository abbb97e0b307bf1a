// The access log writer: lines reach the file, reopen() follows a rotation, a file that
// cannot be written costs counted lines and never blocks a producer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include <sluice/error.h>

#include "access_log/access_log.h"
#include "support/log_capture.h"

namespace sluice::detail {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

class access_log_test : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/sluice_access_log_XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        path_ = dir_ + "/access.log";
    }
    void TearDown() override {
        std::remove(path_.c_str());
        std::remove((path_ + ".1").c_str());
        ::rmdir(dir_.c_str());
    }

    static void push(access_log& log, std::size_t loop, const std::string& text) {
        access_queue* q = log.queue(loop);
        ASSERT_NE(q, nullptr);
        if (std::string* s = q->reserve()) {
            *s = text;
            q->commit();
        } else {
            ADD_FAILURE() << "queue full";
        }
    }

    access_log_config cfg() const {
        access_log_config c;
        c.path = path_;
        c.queue_lines = 128;
        return c;
    }

    std::string dir_;
    std::string path_;
    test::log_capture capture_;
    sluice::logger log_{log_level::info, [this](log_level l, std::string_view t) { capture_.record(l, t); }};
};

TEST_F(access_log_test, lines_of_every_loop_reach_the_file) {
    access_log log(cfg(), 2, log_);
    push(log, 0, "a\n");
    push(log, 1, "b\n");
    log.flush();
    const std::string text = read_file(path_);
    EXPECT_NE(text.find("a\n"), std::string::npos);
    EXPECT_NE(text.find("b\n"), std::string::npos);
    EXPECT_EQ(log.figures().written, 2U);
    EXPECT_EQ(log.queue(2), nullptr);
}

TEST_F(access_log_test, reopen_follows_a_rotation) {
    access_log log(cfg(), 1, log_);
    push(log, 0, "before\n");
    log.flush();
    ASSERT_EQ(std::rename(path_.c_str(), (path_ + ".1").c_str()), 0); // logrotate moves the file
    push(log, 0, "moved\n");
    log.flush();
    log.reopen();
    push(log, 0, "after\n");
    log.flush();
    EXPECT_EQ(read_file(path_ + ".1"), "before\nmoved\n");
    EXPECT_EQ(read_file(path_), "after\n");
}

TEST_F(access_log_test, a_file_that_cannot_be_written_costs_counted_lines_and_is_reported) {
    access_log_config c = cfg();
    c.path = "/dev/full"; // opens, every write fails with ENOSPC
    access_log log(c, 1, log_);
    push(log, 0, "lost\n");
    push(log, 0, "lost too\n");
    log.flush();
    EXPECT_EQ(log.figures().write_errors, 2U);
    EXPECT_EQ(log.figures().written, 0U);
    EXPECT_TRUE(capture_.contains("access log cannot write '/dev/full'"));
}

TEST_F(access_log_test, a_full_queue_drops_without_waiting) {
    access_log_config c = cfg();
    c.queue_lines = 64; // the smallest queue
    access_log log(c, 1, log_);
    // The writer sweeps every 10 ms: 10,000 lines at once overrun 64 slots whatever it does.
    std::size_t dropped = 0;
    access_queue* q = log.queue(0);
    ASSERT_NE(q, nullptr);
    for (int i = 0; i < 10'000; ++i) {
        std::string* s = q->reserve();
        if (s == nullptr) {
            ++dropped;
            continue;
        }
        *s = "x\n";
        q->commit();
    }
    log.flush();
    EXPECT_GT(dropped, 0U);
    EXPECT_EQ(log.figures().dropped, dropped);
    EXPECT_EQ(log.figures().written + dropped, 10'000U);
}

TEST_F(access_log_test, a_path_that_cannot_be_opened_at_start_is_a_startup_error) {
    access_log_config c = cfg();
    c.path = dir_ + "/missing/dir/access.log";
    try {
        access_log log(c, 1, log_);
        FAIL() << "opened";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "access_log.path");
    }
}

} // namespace
} // namespace sluice::detail

namespace sluice::detail {
namespace {

// SIGUSR1 after the path became a FIFO nobody reads: a blocking open() would hold the writer
// (and with it flush() and the stop) for ever. The reopen fails at once, is reported, and the
// old file keeps the lines, as for any reopen that fails.
TEST_F(access_log_test, reopen_onto_a_fifo_without_a_reader_keeps_the_old_file) {
    access_log log(cfg(), 1, log_);
    ASSERT_EQ(std::rename(path_.c_str(), (path_ + ".1").c_str()), 0);
    ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
    log.reopen();
    push(log, 0, "kept\n");
    auto flushed = std::async(std::launch::async, [&log] { log.flush(); });
    if (flushed.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
        // Release the writer's open() so that the test ends.
        const int reader = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        flushed.wait();
        ::close(reader);
        FAIL() << "reopen() waited for a reader of the FIFO";
    }
    EXPECT_EQ(read_file(path_ + ".1"), "kept\n");
    EXPECT_TRUE(capture_.contains("access log cannot reopen '" + path_ + "'"));
}

// A FIFO that a reader holds open (a log shipper) is written to, as stdout's pipe is.
TEST_F(access_log_test, a_fifo_with_a_reader_gets_the_lines) {
    ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
    const int reader = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(reader, 0);
    {
        access_log log(cfg(), 1, log_);
        push(log, 0, "through\n");
        log.flush();
    }
    char buf[64] = {};
    const ssize_t n = ::read(reader, buf, sizeof buf);
    ::close(reader);
    EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), "through\n");
}

} // namespace
} // namespace sluice::detail
