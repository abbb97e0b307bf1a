// The per-loop keep-alive pool (see client_pool.h).
#include "client/client_pool.h"

#include <algorithm>

#include "client/client_connection.h"
#include "http/client_request_writer.h"
#include "loop/deadline.h"

namespace sluice::detail {

namespace {

std::int64_t ns_of(clock::time_point t) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

} // namespace

client_pool::~client_pool() {
    // Normally zero by now (shutdown emptied the pool); a pool dropped otherwise must not leave
    // its figures in the client's gauges for ever.
    cfg_.counters->idle.fetch_sub(published_idle_, std::memory_order_relaxed);
    cfg_.counters->pending.fetch_sub(published_pending_, std::memory_order_relaxed);
}

void client_pool::publish_gauges() noexcept {
    // Differences, not stores: the gauges are shared by every loop's pool of this client.
    const auto idle = static_cast<std::int64_t>(idle_.size());
    const auto pending = static_cast<std::int64_t>(waiters_.size() + connecting_);
    if (idle != published_idle_) {
        cfg_.counters->idle.fetch_add(idle - published_idle_, std::memory_order_relaxed);
        published_idle_ = idle;
    }
    if (pending != published_pending_) {
        cfg_.counters->pending.fetch_add(pending - published_pending_, std::memory_order_relaxed);
        published_pending_ = pending;
    }
}

void client_pool::connect_began() noexcept {
    ++connecting_;
    publish_gauges();
}

void client_pool::connect_ended() noexcept {
    --connecting_;
    publish_gauges();
}

void client_pool::attach() {
    // The server stops: its exchanges in progress get shutdown_timeout_ms to finish, and the
    // upstream calls they wait for are part of that (a gateway's drain would otherwise answer
    // every proxied request in flight with 502). Once the server's connections have all
    // closed (answered, or ended when the drain ran out), only this pool's connections keep
    // the loop: calls still running then end with cancelled and the connections close.
    // Held weakly: a client destroyed while the server runs frees its pools (~client).
    loop_.on_drained(weak_from_this(), [this] { shutdown(); });
}

void client_pool::submit(std::shared_ptr<client_call_state> call) noexcept {
    // A stop in progress is no reason to refuse: the exchange that calls may be draining.
    if (stopped_ || call->cancel_requested.load(std::memory_order_acquire)) {
        deliver(call, result<client_response>(client_errc::cancelled));
        return;
    }
    try {
        // The first entry's name for now: the connection that takes the call names its own
        // entry (aim_head), known only once an address is picked or an idle connection found.
        std::size_t host_at = std::string::npos;
        const std::error_code e = http::write_request_head(call->request, host(0).name, call->head, &host_at);
        if (e) {
            deliver(call, result<client_response>(e));
            return;
        }
        call->head_host_at = host_at;
        call->head_host_len = host(0).name.size();
        call->head_host = 0;
        // The head holds them now (a retry resends the head): a call waiting seconds for its
        // upstream does not keep a second copy of every header.
        std::vector<client_header>().swap(call->request.headers);
    } catch (...) {
        deliver(call, result<client_response>(client_errc::invalid_request));
        return;
    }
    acquire(std::move(call));
}

void client_pool::acquire(std::shared_ptr<client_call_state> call) noexcept {
    const clock::time_point now = loop_.now();
    while (!idle_.empty()) {
        client_connection* c = idle_.back();
        idle_.pop_back();
        publish_gauges();
        if (!c->reusable(now)) {
            c->close_now();
            continue;
        }
        cfg_.counters->reused.fetch_add(1, std::memory_order_relaxed);
        c->run(std::move(call), true);
        return;
    }
    if (all_.size() < cfg_.options.max_connections) {
        open_new(std::move(call));
        return;
    }
    if (waiters_.size() >= cfg_.options.max_pending) {
        deliver(call, result<client_response>(client_errc::pool_exhausted));
        return;
    }
    try {
        waiters_.push_back(call);
    } catch (...) {
        deliver(call, result<client_response>(client_errc::pool_exhausted));
        return;
    }
    publish_gauges();
    call->pool = this;
    call->waiting = true;
    call->acquire_timer.fire = &on_acquire_timeout;
    call->acquire_timer.ctx = call.get();
    loop_.arm(call->acquire_timer, deadline_after(now, cfg_.options.acquire_timeout));
}

bool client_pool::aim_head(client_call_state& call, std::size_t entry) noexcept {
    if (call.head_host_at == std::string::npos || call.head_host == entry) {
        return true; // the request's own Host, or the right name already
    }
    const std::string& name = host(entry).name;
    try {
        std::string head;
        head.reserve(call.head.size() - call.head_host_len + name.size());
        head.append(call.head, 0, call.head_host_at)
            .append(name)
            .append(call.head, call.head_host_at + call.head_host_len, std::string::npos);
        if (call.retried) {
            // The old connection of a retry may still be sending the current head: it moves to
            // spare_head untouched (a head is never short enough for std::string to keep it
            // inline, "Host: " and the request line alone are longer, so moving it keeps its
            // bytes where they are), and it lives as long as the call, which that send holds.
            call.spare_head = std::move(call.head);
        }
        call.head = std::move(head); // else never sent: freed, no second copy kept
    } catch (...) {
        return false;
    }
    call.head_host = entry;
    call.head_host_len = name.size();
    return true;
}

void client_pool::open_new(std::shared_ptr<client_call_state> call) noexcept {
    std::shared_ptr<upstream_address> a = pick_address(*call);
    if (!a) {
        // Every address is marked down (or this call tried those that are not).
        deliver(call, result<client_response>(client_errc::refused));
        return;
    }
    open_on(std::move(call), std::move(a));
}

void client_pool::open_on(std::shared_ptr<client_call_state> call,
                          std::shared_ptr<upstream_address> a) noexcept {
    ++call->connect_attempts;
    client_connection* c = nullptr;
    try {
        c = new client_connection(shared_from_this(), std::move(a));
        all_.push_back(c);
    } catch (...) {
        if (c != nullptr) {
            c->close_now();
        }
        deliver(call, result<client_response>(client_errc::refused));
        return;
    }
    c->start_connect(std::move(call));
}

const address_set& client_pool::addresses() noexcept {
    // The generation first: a publish stores the set, then bumps it, so a set loaded after
    // seeing generation g is g's or newer (never older: at worst it is loaded once more).
    const std::uint64_t g = cfg_.upstream->generation();
    if (g != set_generation_) {
        set_ = cfg_.upstream->current();
        set_generation_ = g;
    }
    return *set_;
}

std::shared_ptr<upstream_address> client_pool::pick_address(client_call_state& call) noexcept {
    const address_set& addrs = addresses();
    const std::size_t n = addrs.size();
    if (n == 0) {
        return nullptr; // never published (apply keeps a host's last addresses), but no % 0
    }
    // One turn of the shared rotation per call, then a scan of every address from it on this
    // thread. Taking a turn per step instead let the calls of other loops, advancing the same
    // counter between two steps, walk this scan past the one live address.
    if (!call.has_ticket) {
        call.ticket = cfg_.upstream->next.fetch_add(1, std::memory_order_relaxed);
        call.has_ticket = true;
    }
    const std::int64_t now = ns_of(loop_.now());
    const std::size_t start = static_cast<std::size_t>(call.ticket % n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::shared_ptr<upstream_address>& a = addrs[(start + i) % n];
        if (std::find(call.tried.begin(), call.tried.end(), a) != call.tried.end()) {
            continue; // its connect failed for this call already
        }
        // One address is never skipped (nginx ignores fail_timeout for a single server): a
        // refusal then fails only the calls that meet it.
        if (n == 1 || a->failed_until_ns.load(std::memory_order_relaxed) <= now) {
            return a;
        }
    }
    return nullptr;
}

void client_pool::connect_failed(client_connection* c, const std::shared_ptr<upstream_address>& a,
                                 std::shared_ptr<client_call_state> call, client_errc why) noexcept {
    const address_set& addrs = addresses();
    if (addrs.size() > 1) {
        // Before c's slot goes to a waiter, which must not be sent where this failed. The address
        // object, not an index: it may have left the set since the connect began (a refresh),
        // and then the mark is harmless.
        a->failed_until_ns.store(ns_of(deadline_after(loop_.now(), cfg_.options.fail_timeout)),
                                 std::memory_order_relaxed);
    }
    if (!call) {
        c->close_now();
        return;
    }
    if (call->cancel_requested.load(std::memory_order_acquire) || stopped_) {
        c->close_now();
        deliver(call, result<client_response>(client_errc::cancelled));
        return;
    }
    // Like nginx's proxy_next_upstream error timeout: a connect that failed sent nothing, so
    // the next address may take the call; each address at most once per call.
    if (call->connect_attempts < addrs.size()) {
        try {
            call->tried.push_back(a);
        } catch (...) {
            c->close_now();
            deliver(call, result<client_response>(why));
            return;
        }
        if (std::shared_ptr<upstream_address> next = pick_address(*call)) {
            // The call takes c's place in max_connections: c leaves the count before it closes,
            // so that closing it frees no slot for a waiter as well (the call came first).
            all_.erase(std::remove(all_.begin(), all_.end(), c), all_.end());
            open_on(std::move(call), std::move(next));
            c->close_now();
            return;
        }
    }
    c->close_now(); // its slot goes to a waiter
    deliver(call, result<client_response>(why));
}

void client_pool::retry(std::shared_ptr<client_call_state> call) noexcept {
    call->retried = true;
    cfg_.counters->retried.fetch_add(1, std::memory_order_relaxed);
    if (stopped_ || call->cancel_requested.load(std::memory_order_acquire)) {
        deliver(call, result<client_response>(client_errc::cancelled));
        return;
    }
    // At once and on a fresh connection, even when that briefly makes one more than
    // max_connections (the stale one is closing): the call must not queue behind others.
    open_new(std::move(call));
}

void client_pool::put_idle(client_connection* c) noexcept {
    if (!waiters_.empty()) {
        auto call = std::move(waiters_.front());
        waiters_.pop_front();
        publish_gauges();
        call->waiting = false;
        call->pool = nullptr;
        loop_.cancel(call->acquire_timer);
        cfg_.counters->reused.fetch_add(1, std::memory_order_relaxed);
        c->run(std::move(call), true);
        return;
    }
    try {
        idle_.push_back(c);
    } catch (...) {
        c->close_now();
        return;
    }
    publish_gauges();
}

void client_pool::forget(client_connection* c) noexcept {
    idle_.erase(std::remove(idle_.begin(), idle_.end(), c), idle_.end());
    all_.erase(std::remove(all_.begin(), all_.end(), c), all_.end());
    publish_gauges();
    serve_waiters();
}

void client_pool::serve_waiters() noexcept {
    while (!waiters_.empty() && !stopped_ && all_.size() < cfg_.options.max_connections) {
        auto call = std::move(waiters_.front());
        waiters_.pop_front();
        publish_gauges();
        call->waiting = false;
        call->pool = nullptr;
        loop_.cancel(call->acquire_timer);
        open_new(std::move(call));
    }
}

void client_pool::remove_waiter(client_call_state* call) noexcept {
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
        if (it->get() == call) {
            auto keep = std::move(*it);
            waiters_.erase(it);
            publish_gauges();
            keep->waiting = false;
            keep->pool = nullptr;
            loop_.cancel(keep->acquire_timer);
            return;
        }
    }
}

void client_pool::on_acquire_timeout(timer& t) noexcept {
    auto* call = static_cast<client_call_state*>(t.ctx);
    client_pool* self = call->pool;
    if (self == nullptr) {
        return;
    }
    for (auto it = self->waiters_.begin(); it != self->waiters_.end(); ++it) {
        if (it->get() == call) {
            auto keep = std::move(*it);
            self->waiters_.erase(it);
            self->publish_gauges();
            keep->waiting = false;
            keep->pool = nullptr;
            self->deliver(keep, result<client_response>(client_errc::acquire_timed_out));
            return;
        }
    }
}

void client_pool::cancel(const std::shared_ptr<client_call_state>& call) noexcept {
    if (call->finished.load(std::memory_order_acquire)) {
        return;
    }
    if (call->waiting) {
        remove_waiter(call.get());
        deliver(call, result<client_response>(client_errc::cancelled));
        return;
    }
    if (call->conn != nullptr) {
        call->conn->abort_call(client_errc::cancelled); // closes: a half-used connection is never pooled
    }
    // Neither waiting nor on a connection: it has not reached the pool yet (submit() sees
    // cancel_requested) or it is between two connections (connect_failed / retry see it).
}

void client_pool::shutdown() noexcept {
    if (stopped_.exchange(true, std::memory_order_acq_rel)) {
        return;
    }
    while (!waiters_.empty()) {
        auto call = std::move(waiters_.front());
        waiters_.pop_front();
        call->waiting = false;
        call->pool = nullptr;
        loop_.cancel(call->acquire_timer);
        deliver(call, result<client_response>(client_errc::cancelled));
    }
    // abort_call() and close_now() take connections out of all_ and idle_.
    while (!all_.empty()) {
        all_.back()->abort_call(client_errc::cancelled);
    }
    idle_.clear();
    publish_gauges();
}

void client_pool::deliver(const std::shared_ptr<client_call_state>& call,
                          result<client_response> r) noexcept {
    if (call->finished.exchange(true, std::memory_order_acq_rel)) {
        return;
    }
    if (r) {
        cfg_.counters->completed.fetch_add(1, std::memory_order_relaxed);
    } else {
        const std::error_code e = r.error();
        const auto kind = static_cast<std::size_t>(e.value());
        // Every error the pool and its connections deliver is a client_errc; a foreign one
        // would count in `failed` only.
        if (e.category() == client_category() && kind >= 1 && kind <= client_errc_count) {
            cfg_.counters->failed_by_kind[kind - 1].fetch_add(1, std::memory_order_relaxed);
        }
        cfg_.counters->failed.fetch_add(1, std::memory_order_relaxed);
    }
    try {
        call->deliver(std::move(r));
    } catch (...) {
        // The outcome could not be posted (out of memory): the caller's callback is dropped.
    }
    call->deliver = nullptr; // drop what it captured (a coroutine's completion) now
}

} // namespace sluice::detail
