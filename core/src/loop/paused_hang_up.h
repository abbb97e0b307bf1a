// Which end-of-stream reports a receiver can believe after it paused (backend.h rule 6).
//
// While receiving is paused a driver still reports the peer's hang-up, before the bytes still
// unread ahead of the FIN. That report can reach the receiver after it resumed: reads made
// before the pause took effect come after pause_recv(), the receiver resumes during them (an
// output that drained, a reader that caught up), the pause's final completion comes and the
// receiver arms again, and the hang-up heard while paused follows in the same batch (io_uring
// reports its hang-up poll right behind the cancelled multishot). Taken as the end, it cuts
// off what is still in the socket: a close-delimited body short by a few buffers, pipelined
// requests never read.
//
// So after a pause, one end-of-stream report is taken as stale: the receiver arms again (a
// no-op for a driver still armed) and a real end is reported again (rule 6: recv() after the end
// gives the rest, then the end). Bytes delivered to an arm made after the pause show that the
// pause's reports are all in (a driver reports the paused hang-up before anything of a new arm).
//
// Used by the server connection and the client transport; the loop thread only.
#pragma once

#include <utility>

namespace sluice::detail {

class paused_hang_up {
public:
    /// pause_recv() was called.
    void paused() noexcept {
        suspect_ = true;
        rearmed_ = false;
    }
    /// recv() was called.
    void armed() noexcept { rearmed_ = suspect_; }
    /// Bytes arrived.
    void received() noexcept {
        if (rearmed_) {
            suspect_ = false;
        }
    }
    /// A recv completion with result 0 and more == false arrived: true when it may be the
    /// pause's hang-up, and the receiver must arm again rather than end the stream.
    bool stale_end() noexcept { return std::exchange(suspect_, false); }

private:
    bool suspect_ = false; // paused since the last end report (believed or taken as stale)
    bool rearmed_ = false; // armed again since that pause
};

} // namespace sluice::detail
