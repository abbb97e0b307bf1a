// An await a test thread opens: a coroutine handler co_awaits wait(ex) and stays suspended
// until open() is called. It also opens by itself after 10 s, so that no coroutine outlives a
// failed test.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include <sluice/async_op.h>
#include <sluice/exchange.h>

namespace sluice::test {

class await_gate {
public:
    async_op<void> wait(const exchange& ex) {
        return async_op<void>([this, loop = ex.executor()](completion<void> done) {
            {
                std::lock_guard lock(mu_);
                if (!open_) {
                    waiting_ = done;
                    (void)loop.post_after(std::chrono::milliseconds(10'000), [done] { done(); });
                    return;
                }
            }
            done();
        });
    }

    void open() {
        std::optional<completion<void>> w;
        {
            std::lock_guard lock(mu_);
            open_ = true;
            w.swap(waiting_);
        }
        if (w) {
            (*w)();
        }
    }

private:
    std::mutex mu_;
    bool open_ = false;
    std::optional<completion<void>> waiting_;
};

} // namespace sluice::test
