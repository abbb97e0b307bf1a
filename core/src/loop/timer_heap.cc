#include "loop/timer_heap.h"

namespace sluice::detail {

void timer_heap::arm(timer& t, clock::time_point when) {
    const bool was_armed = t.armed();
    const bool earlier = was_armed && when < t.when;
    t.when = when;
    t.seq = ++seq_;
    if (!was_armed) {
        heap_.push_back(&t);
        t.index = static_cast<std::uint32_t>(heap_.size() - 1);
        sift_up(t.index);
    } else if (earlier) {
        sift_up(t.index);
    } else {
        sift_down(t.index);
    }
}

void timer_heap::cancel(timer& t) noexcept {
    if (!t.armed()) {
        return;
    }
    const std::uint32_t i = t.index;
    timer* last = heap_.back();
    heap_.pop_back();
    t.index = timer::not_armed;
    if (last == &t) {
        return;
    }
    place(last, i);
    sift_up(i);
    sift_down(last->index);
}

timer* timer_heap::pop_due(clock::time_point now) noexcept {
    if (heap_.empty() || heap_.front()->when > now) {
        return nullptr;
    }
    timer* t = heap_.front();
    cancel(*t);
    return t;
}

void timer_heap::sift_up(std::uint32_t i) noexcept {
    timer* t = heap_[i];
    while (i > 0) {
        const std::uint32_t parent = (i - 1) / 2;
        if (!before(t, heap_[parent])) {
            break;
        }
        place(heap_[parent], i);
        i = parent;
    }
    place(t, i);
}

void timer_heap::sift_down(std::uint32_t i) noexcept {
    const auto n = static_cast<std::uint32_t>(heap_.size());
    timer* t = heap_[i];
    for (;;) {
        std::uint32_t child = 2 * i + 1;
        if (child >= n) {
            break;
        }
        if (child + 1 < n && before(heap_[child + 1], heap_[child])) {
            ++child;
        }
        if (!before(heap_[child], t)) {
            break;
        }
        place(heap_[child], i);
        i = child;
    }
    place(t, i);
}

} // namespace sluice::detail
