// A hang-up reported while receiving is paused (backend.h rule 6) comes before the bytes that
// were in the socket ahead of the FIN. The transport must read those bytes before it ends the
// stream, also when it resumed within the batch that carries the report: the report was made
// while paused and reaches the transport after the resume. Taken as the end then, a
// close-delimited body would be cut short and taken whole.
#include <gtest/gtest.h>

#include <string>

#include "client/transport.h"
#include "fakes/fake_driver.h"
#include "loop/loop.h"

namespace sluice::testing {
namespace {

const std::string close_delimited_answer =
    "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe body, ended by the close";

// Pauses at the first bytes. By default it sends and resumes when the send is reported, which
// the fake driver reports in the next batch between the pause's cancellation and the hang-up.
// With `resume_later`, it resumes from a timer instead, after that batch was handled.
struct pausing_reader final : detail::transport_user {
    detail::loop* l = nullptr;
    detail::transport* t = nullptr;
    fake_driver* d = nullptr;
    bool resume_later = false;
    /// With the fake's reads_after_pause: resumes from inside the last of those reads, so the
    /// transport is receiving again when the pause's final completion and the hang-up come.
    std::size_t resume_after_late_reads = 0;
    std::size_t late_reads = 0;
    bool resumed_before_final = false;
    std::string data;
    std::string data_at_end;
    int ends = 0;
    int end_result = 1;
    int ends_before_resume = -1;
    bool told_before_resume = false;
    bool paused_once = false;
    const std::string ping = "ping";

    void on_connected(int) noexcept override {}
    void on_data(std::string_view bytes) noexcept override {
        data.append(bytes);
        if (paused_once) {
            if (resume_after_late_reads > 0 && ++late_reads == resume_after_late_reads) {
                resumed_before_final = d->peers[7].cancel_due;
                EXPECT_EQ(t->resume_receiving(), 0);
            }
            return;
        }
        paused_once = true;
        t->pause_receiving();
        if (resume_later) {
            resume_once_told();
            return;
        }
        if (resume_after_late_reads > 0) {
            return;
        }
        const iovec iov[1] = {{const_cast<char*>(ping.data()), ping.size()}};
        EXPECT_EQ(t->send(iov, 1), 0);
    }
    void on_peer_closed(int result) noexcept override {
        ++ends;
        end_result = result;
        data_at_end = data;
        t->close();
    }
    // A timer fires in the iteration that armed it when the machine is slow (a sanitizer), before
    // the next wait reports the hang-up; so it looks again each millisecond, a bounded number of
    // times, and resumes once the report was handled while paused.
    void resume_once_told(int looks_left = 2000) {
        l->call_after(std::chrono::milliseconds(1), [this, looks_left] {
            if (!d->peers[7].hang_up_told && looks_left > 0) {
                resume_once_told(looks_left - 1);
                return;
            }
            ends_before_resume = ends;
            told_before_resume = d->peers[7].hang_up_told;
            EXPECT_EQ(t->resume_receiving(), 0);
        });
    }
    void on_sent(int) noexcept override { EXPECT_EQ(t->resume_receiving(), 0); }
    void on_closed() noexcept override { l->release(); }
};

void run(std::size_t chunk, pausing_reader& r, std::size_t reads_after_pause = 0) {
    auto drv = std::make_unique<fake_driver>();
    fake_driver* d = drv.get();
    d->chunk = chunk;
    d->peers[7].inbound = close_delimited_answer;
    d->peers[7].eof_at_end = true;
    d->peers[7].hang_up_while_paused = true;
    d->peers[7].reads_after_pause = reads_after_pause;
    logger log(log_level::error);
    detail::loop l(std::move(drv), log, 0);
    detail::transport t(l, r);
    r.l = &l;
    r.t = &t;
    r.d = d;
    l.retain();
    t.adopt(7);
    ASSERT_EQ(t.start_receiving(), 0);
    l.run(detail::loop::run_mode::until_idle);
    EXPECT_EQ(d->peers[7].outbound, r.resume_later || r.resume_after_late_reads > 0 ? "" : r.ping);
}

TEST(transport_pause, a_hang_up_reported_while_paused_is_not_the_end_after_a_resume_in_the_same_batch) {
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{4}, close_delimited_answer.size() - 1}) {
        pausing_reader r;
        run(chunk, r);
        EXPECT_EQ(r.ends, 1) << "chunk " << chunk;
        EXPECT_EQ(r.end_result, 0) << "chunk " << chunk;
        EXPECT_EQ(r.data_at_end, close_delimited_answer)
            << "chunk " << chunk << ": the stream ended before its last bytes";
    }
}

// Paused throughout the report: it is ignored, and the end comes after the bytes on resume.
TEST(transport_pause, a_hang_up_heard_while_still_paused_waits_for_the_resume) {
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{4}, close_delimited_answer.size() - 1}) {
        pausing_reader r;
        r.resume_later = true;
        run(chunk, r);
        EXPECT_TRUE(r.told_before_resume)
            << "chunk " << chunk << ": the case did not report a hang-up while paused";
        EXPECT_EQ(r.ends_before_resume, 0) << "chunk " << chunk;
        EXPECT_EQ(r.ends, 1) << "chunk " << chunk;
        EXPECT_EQ(r.end_result, 0) << "chunk " << chunk;
        EXPECT_EQ(r.data_at_end, close_delimited_answer) << "chunk " << chunk;
    }
}

// Reads completed before the pause took effect still come after it, and the reader resumes
// during them: the pause's final completion and the hang-up heard while paused then reach a
// transport that is receiving again. The data that came after the pause is no sign that the
// report is fresh (found by gateway_stream_test: on the blocking rows, whose client runs on
// io_uring, a body cut after 1 MiB reached the relay up to 30 KiB short).
TEST(transport_pause, a_hang_up_behind_reads_made_before_the_pause_is_not_the_end) {
    for (const std::size_t late : {std::size_t{1}, std::size_t{3}}) {
        pausing_reader r;
        r.resume_after_late_reads = late;
        run(4, r, late);
        EXPECT_TRUE(r.resumed_before_final) << "late " << late << ": the case did not happen";
        EXPECT_EQ(r.ends, 1) << "late " << late;
        EXPECT_EQ(r.end_result, 0) << "late " << late;
        EXPECT_EQ(r.data_at_end, close_delimited_answer)
            << "late " << late << ": the stream ended before its last bytes";
    }
}

} // namespace
} // namespace sluice::testing
