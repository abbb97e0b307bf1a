// The core's connection code reaches a response's streaming state through this (a friend of
// sluice::response); handlers never see it.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <sluice/response.h>

namespace sluice::detail {

class response_access {
public:
    /// Streaming: whether the status line and headers went out already.
    static bool is_head_sent(const response& r) noexcept { return r.head_sent_; }
    static void mark_head_sent(response& r) noexcept { r.head_sent_ = true; }

    /// Streaming: the bytes written since the last part went out; serialize them, then
    /// clear_pending() (the buffer keeps its capacity).
    static std::string_view pending(const response& r) noexcept { return r.body_; }
    static void clear_pending(response& r) noexcept { r.body_.clear(); }
};

} // namespace sluice::detail
