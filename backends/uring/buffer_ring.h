// The receive buffers of one ring: a provided buffer ring (IORING_REGISTER_PBUF_RING,
// 5.19) from which the kernel picks a buffer only when data has arrived, so an idle
// connection holds none; or, on kernels without buffer rings, the same memory as a
// free list the driver takes from itself (poll, then recv()).
//
// Sizes. The core's driver_options give a per-loop budget as recv_buffer_bytes x
// recv_buffer_count (16 KiB x 256 = 4 MiB by default). The ring keeps the budget but cuts
// it into 4 KiB buffers (1024 by default): one buffer is one connection that can deliver
// data in a loop iteration before the ring runs dry (-ENOBUFS), and a request head fits in
// 4 KiB, so more, smaller buffers mean fewer starved receives under a burst of small
// requests. The price is more completions for a large body (one per 4 KiB instead of one
// per 16 KiB); with io_uring a completion costs no system call, and the core copies a body
// into the exchange either way. A configured buffer smaller than 4 KiB is used as is.
// The ring holds at most 32768 entries (io_uring_register_buf_ring(3)) and a power of two.
//
// Lending (rule 5 of backend.h): a buffer the kernel filled is lent to the core with its
// completion and comes back through give_back(); buffers given back are published to the
// kernel in one tail update per wait() (publish()), not one per buffer.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::io::uring {

class buffer_pool {
public:
    enum class mode { ring, user };

    struct geometry {
        std::uint32_t buffer_bytes;
        std::uint32_t count;
    };
    /// The geometry for a budget of bytes x count (see the comment above).
    static geometry choose(std::uint32_t bytes, std::uint32_t count) noexcept;

    buffer_pool() = default;
    ~buffer_pool();
    buffer_pool(const buffer_pool&) = delete;
    buffer_pool& operator=(const buffer_pool&) = delete;

    /// Maps the memory and, in ring mode, registers it as buffer group `bgid` of `ring`.
    /// Returns 0 or -errno, with `error` saying why in words a user can act on.
    int init(io_uring* ring, mode m, geometry g, std::uint16_t bgid, std::string& error);

    mode kind() const noexcept { return mode_; }
    std::uint16_t group() const noexcept { return bgid_; }
    std::uint32_t buffer_bytes() const noexcept { return size_; }
    std::uint32_t count() const noexcept { return count_; }
    char* data(std::uint32_t bid) const noexcept { return base_ + std::size_t{bid} * size_; }
    bool valid(std::uint32_t bid) const noexcept { return bid < count_; }

    /// Buffers not lent to the core: in ring mode the kernel may hold some of them in
    /// completions not reaped yet, so this is an upper bound.
    std::uint32_t available() const noexcept { return count_ - lent_; }

    /// The kernel filled `bid` and it goes to the core with a completion.
    void lend(std::uint32_t bid) noexcept;
    /// The core is done with `bid` (release()): back to the ring (at the next publish) or
    /// to the free list.
    void give_back(std::uint32_t bid) noexcept;
    /// The kernel filled `bid` for an operation nobody wants any more (its fd is closing):
    /// straight back, without having been lent.
    void recycle(std::uint32_t bid) noexcept;
    /// Ring mode: makes the buffers given back since the last call visible to the kernel.
    void publish() noexcept;

    /// User mode: takes a free buffer (LIFO, so a quiet loop touches few pages).
    bool take(std::uint32_t& bid) noexcept;
    /// User mode: puts back a buffer taken but not filled.
    void untake(std::uint32_t bid) noexcept { free_.push_back(bid); }

private:
    void add_to_ring(std::uint32_t bid) noexcept;

    mode mode_ = mode::user;
    char* base_ = nullptr;
    std::size_t base_bytes_ = 0;
    io_uring_buf_ring* ring_ = nullptr;
    std::size_t ring_bytes_ = 0;
    std::uint32_t size_ = 0;
    std::uint32_t count_ = 0;
    std::uint32_t lent_ = 0;
    std::uint16_t bgid_ = 0;
    int unpublished_ = 0;
    std::vector<std::uint32_t> free_;
};

} // namespace sluice::io::uring
