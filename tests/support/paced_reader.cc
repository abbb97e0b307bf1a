#include "support/paced_reader.h"

#include <thread>

#include "support/deadline.h"

namespace sluice::test {

std::string read_paced(test_client& c, std::chrono::milliseconds limit,
                       const std::function<bool(const std::string& raw, std::size_t fresh_from)>& whole,
                       bool& eof, pacing p) {
    // A few bytes before the new ones, so that a terminator split across two reads is seen.
    constexpr std::size_t overlap = 16;
    std::this_thread::sleep_for(p.first_pause);
    std::string raw;
    const auto deadline = test_clock::now() + limit;
    std::size_t next_pause = p.pause_every;
    eof = false;
    while (test_clock::now() < deadline) {
        const std::size_t before = raw.size();
        raw += c.read_available(std::chrono::milliseconds(100));
        if (whole(raw, before > overlap ? before - overlap : 0)) {
            break;
        }
        if (c.peer_closed() && c.buffered().empty()) {
            eof = true;
            break;
        }
        if (raw.size() >= next_pause) {
            next_pause += p.pause_every;
            std::this_thread::sleep_for(p.pause);
        }
    }
    return raw;
}

} // namespace sluice::test
