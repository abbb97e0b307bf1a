// Which end-of-stream reports a receiver can believe after it paused (backend.h rule 6).
//
// While receiving is paused a driver still reports the peer's hang-up, before the bytes still
// unread ahead of the FIN. That report can reach the receiver after it resumed and armed
// again: reads made before the pause took effect come after pause_recv(), the receiver resumes
// during them (an output that drained, a reader that caught up), and the pause's final
// completion and the hang-up come together (io_uring, when the pause found the multishot
// already stopped for buffers: the -ECANCELED and its hang-up poll in one batch; epoll, whose
// ready list follows the other events of a wait). Taken as the end, it cuts off what is still
// in the socket: a close-delimited body short by a few buffers, pipelined requests never read.
//
// So after a pause, one end-of-stream report is taken as stale: the receiver arms again and a
// real end is reported again (rule 6: recv() after the end gives the rest, then the end).
// Every pause may bring one report (epoll reports a hang-up once per pause), so the reports
// held are counted, up to max_held. Bytes delivered to an arm made after the last pause show
// that the reports are all in (a driver reports a paused hang-up before anything of a new arm).
//
// Used by the server connection and the client transport; the loop thread only.
#pragma once

namespace sluice::detail {

class paused_hang_up {
public:
    /// The most reports held: a real end costs at most this many receives more. More pauses
    /// than this, none followed by a byte, with their reports all still on the way, do not
    /// happen (a driver reports a pause's hang-up in the wait after it).
    static constexpr int max_held = 4;

    /// pause_recv() was called.
    void paused() noexcept {
        held_ = held_ < max_held ? held_ + 1 : held_;
        rearmed_ = false;
    }
    /// recv() was called.
    void armed() noexcept { rearmed_ = held_ > 0; }
    /// Bytes arrived.
    void received() noexcept {
        if (rearmed_) {
            held_ = 0;
        }
    }
    /// A recv completion with result 0 and more == false arrived: true when it may be a
    /// pause's hang-up, and the receiver must arm again rather than end the stream.
    bool stale_end() noexcept {
        if (held_ == 0) {
            return false;
        }
        --held_;
        return true;
    }

private:
    int held_ = 0;         // reports of pauses that may still come
    bool rearmed_ = false; // armed again since the last pause
};

} // namespace sluice::detail
