#include "shared_link.h"

#include <vector>

namespace slow_backend {

void shared_link::send(const sluice::executor& on, sluice::async_context ctx, std::uint64_t bytes,
                       sluice::response answer) {
    bool start = false;
    {
        std::lock_guard lock(mu_);
        flows_.push_back({std::move(ctx), static_cast<double>(bytes), std::move(answer)});
        if (!ticking_) {
            ticking_ = true;
            last_ = clock::now();
            start = true;
        }
    }
    if (start) {
        tick(on);
    }
}

std::size_t shared_link::flows() const {
    std::lock_guard lock(mu_);
    return flows_.size();
}

void shared_link::tick(const sluice::executor& on) {
    std::vector<flow> finished;
    bool more = false;
    {
        std::lock_guard lock(mu_);
        const auto now = clock::now();
        double budget = std::chrono::duration<double, std::milli>(now - last_).count() * bytes_per_ms_;
        last_ = now;
        // A flow whose client left frees its share at once.
        for (auto it = flows_.begin(); it != flows_.end();) {
            it = it->ctx.is_done() ? flows_.erase(it) : std::next(it);
        }
        // Fair share (water filling): flows needing less than an equal share finish and leave
        // their surplus to the others.
        while (budget > 0 && !flows_.empty()) {
            const double share = budget / static_cast<double>(flows_.size());
            bool any_finished = false;
            for (auto it = flows_.begin(); it != flows_.end();) {
                if (it->left <= share) {
                    budget -= it->left;
                    finished.push_back(std::move(*it));
                    it = flows_.erase(it);
                    any_finished = true;
                } else {
                    ++it;
                }
            }
            if (!any_finished) {
                for (auto& f : flows_) {
                    f.left -= share;
                }
                budget = 0;
            }
        }
        more = !flows_.empty();
        ticking_ = more;
    }
    for (auto& f : finished) {
        f.ctx.complete(std::move(f.answer)); // thread-safe: completes on the exchange's own loop
    }
    if (more && !on.post_after(tick_interval, [this, on] { tick(on); })) {
        // The driving loop has stopped (the server is stopping): its exchanges end with it.
        std::lock_guard lock(mu_);
        ticking_ = false;
    }
}

} // namespace slow_backend
