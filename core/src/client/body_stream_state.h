// The shared state of one client_body_stream (client_stream.h): the streamed call's callbacks
// put the head and the pieces here, the coroutine's next() takes them.
//
//   on_head ------------------> settles the stream() await with a client_body_stream
//   on_body: next() waiting and nothing held: the piece goes to it (max_piece; the rest held)
//            else held; anything held pauses the upstream read
//   next():  something held: take max_piece of it at once
//            the end came: give the end
//            else wait, and resume the upstream read if it was paused
//   on_end:  a waiting next() with nothing held gets the end; held pieces go out first
//
// Threads: the callbacks run on the call's loop, next() on the coroutine's thread (the
// exchange's loop, or a worker in its first segment with dispatch = pool): everything under
// mu_. Completions are called outside mu_: a completion that loses to a cancellation destroys
// its argument, and a client_body_stream's destructor takes mu_.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/async_op.h>
#include <sluice/client.h>

namespace sluice::detail {

class body_stream_state : public std::enable_shared_from_this<body_stream_state> {
public:
    explicit body_stream_state(completion<client_body_stream> head_waiter)
        : head_waiter_(std::move(head_waiter)) {}

    /// The callbacks to give send_streaming (they hold this state until the call ends).
    client_stream_handler handler();
    /// The call, once send_streaming returned it.
    void set_call(client_call call);

    /// A next(): settles `done` with a piece or the end, now or when one arrives.
    void start_next(completion<body_step> done);
    void cancel() noexcept;

private:
    void on_head(client_response head);
    void on_body(std::string_view piece);
    void on_end(std::error_code e);
    /// Under mu_: up to max_piece of what is held.
    std::string take_held();
    /// Under mu_: stop the upstream read (at once when the handle is here, else in set_call).
    void pause_locked() noexcept;

    std::mutex mu_;
    client_call call_;
    bool call_set_ = false;
    bool paused_ = false;
    std::optional<completion<client_body_stream>> head_waiter_;
    std::optional<completion<body_step>> piece_waiter_;
    std::string held_;
    std::size_t held_off_ = 0; ///< held_ before this went out (a batch is handed out in max_piece steps)
    bool cancel_wanted_ = false;
    bool ended_ = false;
    std::error_code end_error_;
};

} // namespace sluice::detail
