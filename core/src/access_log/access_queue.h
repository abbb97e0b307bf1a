// A bounded single-producer single-consumer ring of log lines: one per loop, filled by the
// loop's thread, emptied by the access log's writer thread. The producer never waits and
// never takes a lock: when the ring is full the line is dropped and counted. Slots keep their
// string's capacity, so steady-state logging allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sluice::detail {

class access_queue {
public:
    explicit access_queue(std::size_t capacity) : capacity_(capacity), slots_(new std::string[capacity]) {}

    /// Producer: an empty slot to fill then commit(), or nullptr (counted as dropped) when full.
    std::string* reserve() noexcept {
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        if (head - tail_.load(std::memory_order_acquire) >= capacity_) {
            dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
            return nullptr;
        }
        std::string* s = &slots_[head % capacity_];
        s->clear();
        return s;
    }
    /// Producer: publishes the slot reserve() gave (release: the line's bytes before the index).
    void commit() noexcept {
        head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }

    /// Consumer: passes each published line to f (which must not throw), then frees the slots.
    template <typename F>
    std::size_t drain(F&& f) noexcept {
        const std::uint64_t head = head_.load(std::memory_order_acquire);
        std::uint64_t tail = tail_.load(std::memory_order_relaxed);
        const std::size_t n = static_cast<std::size_t>(head - tail);
        for (; tail != head; ++tail) {
            f(slots_[tail % capacity_]);
        }
        tail_.store(tail, std::memory_order_release);
        return n;
    }

    std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
    std::size_t capacity() const noexcept { return capacity_; }

private:
    const std::size_t capacity_;
    std::unique_ptr<std::string[]> slots_;
    // Apart, so the producer's and the consumer's stores do not bounce one cache line.
    alignas(64) std::atomic<std::uint64_t> head_{0};
    alignas(64) std::atomic<std::uint64_t> tail_{0};
    alignas(64) std::atomic<std::uint64_t> dropped_{0};
};

} // namespace sluice::detail
