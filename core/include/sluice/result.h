// A value or the std::error_code that explains its absence: what a co_await of an
// asynchronous operation (sluice::async_op<T>) gives back.
//
//   sluice::result<std::string> r = co_await fetch_something();
//   if (!r) { log(r.error().message()); co_return; }
//   use(*r);
#pragma once

#include <optional>
#include <system_error>
#include <utility>

namespace sluice {

template <class T>
class result {
public:
    /// A success.
    result(T value) : value_(std::move(value)) {}
    /// A failure. An empty error_code is not a value: it reads as std::errc::invalid_argument,
    /// so a result is never both empty and without an error.
    result(std::error_code error) noexcept
        : error_(error ? error : std::make_error_code(std::errc::invalid_argument)) {}

    bool has_value() const noexcept { return value_.has_value(); }
    explicit operator bool() const noexcept { return has_value(); }
    /// Empty when the operation succeeded.
    std::error_code error() const noexcept { return error_; }

    /// The value; throws std::system_error with error() when there is none.
    T& value() & {
        check();
        return *value_;
    }
    const T& value() const& {
        check();
        return *value_;
    }
    T&& value() && {
        check();
        return std::move(*value_);
    }
    T& operator*() & noexcept { return *value_; }
    const T& operator*() const& noexcept { return *value_; }
    T* operator->() noexcept { return &*value_; }
    const T* operator->() const noexcept { return &*value_; }

private:
    void check() const {
        if (!value_) {
            throw std::system_error(error_);
        }
    }

    std::optional<T> value_;
    std::error_code error_;
};

} // namespace sluice
