// One record per operation in flight on the ring, named by the SQE's user_data as
// (generation << 32 | index). A record outlives its SQE until the operation's final CQE
// (the one without IORING_CQE_F_MORE), so close() knows when the last completion for a
// descriptor has arrived (rule 4 of backend.h), and a CQE that does not match the
// record's generation can never be taken for a later operation (the stale-event guard of
// nginx's instance bit and Tomcat's generation counter, for completions).
//
// Records live in fixed chunks that never move: a sendmsg's msghdr and a connect's address
// stay where the kernel was told they are until it has copied them. A record is ~100 bytes;
// an idle connection holds one (its armed receive).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace sluice::io::uring {

enum class op_kind : std::uint8_t {
    wake,         ///< poll on the wake-up eventfd
    accept,       ///< accept (multishot or one-shot)
    recv,         ///< recv with a buffer from the ring (multishot or one-shot)
    recv_poll,    ///< no buffer ring: poll for input, then recv() into the pool
    hup_poll,     ///< receiving paused: poll for the peer's hang-up only (rule 6)
    send,         ///< send / sendmsg
    connect_poll, ///< a connect() in progress: poll for writability, then SO_ERROR
    cancel,       ///< a cancellation (its own CQE counts too)
};

inline constexpr std::uint32_t no_op = ~std::uint32_t{0};

struct op_record {
    void* owner = nullptr;
    int fd = -1;
    std::uint32_t generation = 0;
    std::uint32_t next_free = no_op;
    op_kind kind = op_kind::cancel;
    bool in_use = false;
    bool canceling = false; ///< a cancellation was asked for; its final CQE ends it
    msghdr msg{};           ///< sendmsg with more than one iovec
};

class op_slab {
public:
    static std::uint64_t user_data(std::uint32_t index, std::uint32_t generation) noexcept {
        return std::uint64_t{generation} << 32 | index;
    }

    /// A fresh record, or no_op when memory is exhausted.
    std::uint32_t alloc() noexcept {
        if (free_ == no_op && !grow()) {
            return no_op;
        }
        const std::uint32_t i = free_;
        op_record& r = at(i);
        free_ = r.next_free;
        r.in_use = true;
        r.canceling = false;
        r.owner = nullptr;
        r.fd = -1;
        ++live_;
        return i;
    }

    void free(std::uint32_t i) noexcept {
        op_record& r = at(i);
        r.in_use = false;
        ++r.generation; // a late CQE carrying the old generation no longer matches
        r.next_free = free_;
        free_ = i;
        --live_;
    }

    op_record& at(std::uint32_t i) noexcept { return chunks_[i / chunk_size][i % chunk_size]; }

    /// The record a CQE's user_data names, or null if it names none (stale or foreign).
    op_record* find(std::uint64_t ud, std::uint32_t& index) noexcept {
        index = static_cast<std::uint32_t>(ud & 0xffffffffu);
        if (index / chunk_size >= chunks_.size()) {
            return nullptr;
        }
        op_record& r = at(index);
        if (!r.in_use || r.generation != static_cast<std::uint32_t>(ud >> 32)) {
            return nullptr;
        }
        return &r;
    }

    std::uint64_t user_data_of(std::uint32_t i) noexcept { return user_data(i, at(i).generation); }
    std::uint32_t live() const noexcept { return live_; }

private:
    static constexpr std::uint32_t chunk_size = 256;

    bool grow() noexcept {
        try {
            chunks_.push_back(std::make_unique<op_record[]>(chunk_size));
        } catch (const std::bad_alloc&) {
            return false;
        }
        const auto base = static_cast<std::uint32_t>((chunks_.size() - 1) * chunk_size);
        for (std::uint32_t k = chunk_size; k-- > 0;) {
            op_record& r = at(base + k);
            r.next_free = free_;
            free_ = base + k;
        }
        return true;
    }

    std::vector<std::unique_ptr<op_record[]>> chunks_;
    std::uint32_t free_ = no_op;
    std::uint32_t live_ = 0;
};

} // namespace sluice::io::uring
