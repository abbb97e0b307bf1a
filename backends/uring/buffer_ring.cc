#include "buffer_ring.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "probe.h"

namespace sluice::io::uring {

namespace {

constexpr std::uint32_t preferred_buffer_bytes = 4096;
constexpr std::uint32_t max_ring_entries = 32768; // io_uring_register_buf_ring(3)

std::uint32_t floor_pow2(std::uint64_t v) noexcept {
    std::uint32_t p = 1;
    while (std::uint64_t{p} * 2 <= v && p < max_ring_entries) {
        p *= 2;
    }
    return p;
}

std::size_t round_to_pages(std::size_t bytes) noexcept {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
}

} // namespace

buffer_pool::geometry buffer_pool::choose(std::uint32_t bytes, std::uint32_t count) noexcept {
    bytes = std::max<std::uint32_t>(bytes, 64);
    count = std::max<std::uint32_t>(count, 1);
    const std::uint64_t budget = std::uint64_t{bytes} * count;
    const std::uint32_t size = std::min(bytes, preferred_buffer_bytes);
    return {size, floor_pow2(budget / size)};
}

buffer_pool::~buffer_pool() {
    // The ring is torn down first (the driver's destructor): unregistering is not needed, and
    // from another thread SINGLE_ISSUER would refuse it anyway. The kernel pinned the ring's
    // pages while it was registered, so unmapping our view of them is safe.
    if (ring_ != nullptr) {
        ::munmap(ring_, ring_bytes_);
    }
    if (base_ != nullptr) {
        ::munmap(base_, base_bytes_);
    }
}

int buffer_pool::init(io_uring* ring, mode m, geometry g, std::uint16_t bgid, std::string& error) {
    mode_ = m;
    size_ = g.buffer_bytes;
    count_ = g.count;
    bgid_ = bgid;
    // Anonymous memory: pages are only backed once the kernel writes into a buffer.
    base_bytes_ = round_to_pages(std::size_t{size_} * count_);
    void* mem = ::mmap(nullptr, base_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        const int err = errno;
        error = std::string("mmap of the receive buffers: ") + std::system_category().message(err);
        return -err;
    }
    base_ = static_cast<char*>(mem);
    if (m == mode::user) {
        free_.reserve(count_);
        for (std::uint32_t i = count_; i-- > 0;) {
            free_.push_back(i);
        }
        return 0;
    }
    // liburing 2.3 has no io_uring_setup_buf_ring (2.4): the ring is page-aligned memory of
    // ring_entries x sizeof(io_uring_buf), registered by hand.
    ring_bytes_ = round_to_pages(std::size_t{count_} * sizeof(io_uring_buf));
    mem = ::mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        const int err = errno;
        error = std::string("mmap of the buffer ring: ") + std::system_category().message(err);
        return -err;
    }
    ring_ = static_cast<io_uring_buf_ring*>(mem);
    io_uring_buf_ring_init(ring_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uintptr_t>(ring_);
    reg.ring_entries = count_;
    reg.bgid = bgid_;
    const int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc < 0) {
        // The kernel pins the ring's pages: -ENOMEM here is the locked-memory limit.
        error = explain_setup_error(-rc, "io_uring_register_buf_ring");
        return rc;
    }
    for (std::uint32_t i = 0; i < count_; ++i) {
        add_to_ring(i);
    }
    publish();
    return 0;
}

void buffer_pool::add_to_ring(std::uint32_t bid) noexcept {
    io_uring_buf_ring_add(ring_, data(bid), size_, static_cast<unsigned short>(bid),
                          io_uring_buf_ring_mask(count_), unpublished_);
    ++unpublished_;
}

void buffer_pool::publish() noexcept {
    if (mode_ == mode::ring && unpublished_ > 0) {
        io_uring_buf_ring_advance(ring_, unpublished_);
        unpublished_ = 0;
    }
}

void buffer_pool::lend(std::uint32_t) noexcept {
    ++lent_;
}

void buffer_pool::give_back(std::uint32_t bid) noexcept {
    if (!valid(bid)) {
        return;
    }
    if (lent_ > 0) {
        --lent_;
    }
    recycle(bid);
}

void buffer_pool::recycle(std::uint32_t bid) noexcept {
    if (!valid(bid)) {
        return;
    }
    if (mode_ == mode::ring) {
        add_to_ring(bid);
    } else {
        free_.push_back(bid); // capacity reserved for every buffer: cannot throw
    }
}

bool buffer_pool::take(std::uint32_t& bid) noexcept {
    if (free_.empty()) {
        return false;
    }
    bid = free_.back();
    free_.pop_back();
    return true;
}

} // namespace sluice::io::uring
