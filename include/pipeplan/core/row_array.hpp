// pipeplan/core/row_array.hpp — rows of varying length in one contiguous allocation.
//
// row_array<T> holds rows (e.g. one per device) of trivially copyable entries back to back in one
// buffer, read as spans: `a.size()` rows, `a[r]` (a std::span of row r's entries), `for (const
// auto& row : a)`. A producer that knows an upper bound of the total length writes the rows in order through
// a pointer (start(), then end_row() per row), so filling it allocates at most once and touches
// only what it writes: no per-row allocation, no value-initialization. Buffers of 2 MiB or more
// are huge pages (huge_page_allocator, core/huge_pages.hpp): the first touch of fresh memory
// costs a page fault per 4 KiB page otherwise, which is most of a large fresh simulation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "pipeplan/core/huge_pages.hpp"

namespace pipeplan {

/// Rows of T in one contiguous buffer (see the file comment).
template <class T>
class row_array {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

public:
    using row = std::span<T>;              ///< a row of a mutable array
    using const_row = std::span<const T>;  ///< a row of a const array

    /// Iterates the rows of a const array as const_row.
    class const_iterator {
    public:
        explicit const_iterator(typename std::vector<row>::const_iterator it) noexcept : it_(it) {}
        const_row operator*() const noexcept { return *it_; }
        const_iterator& operator++() noexcept {
            ++it_;
            return *this;
        }
        bool operator==(const const_iterator&) const noexcept = default;

    private:
        typename std::vector<row>::const_iterator it_;
    };

    row_array() = default;
    row_array(const row_array& o) { *this = o; }
    row_array(row_array&& o) noexcept { swap(o); }
    row_array& operator=(const row_array& o) {
        if (this == &o) return *this;
        T* out = start(o.rows_.size(), o.used());
        for (const row& r : o.rows_) {
            out = std::copy(r.begin(), r.end(), out);
            end_row(out);
        }
        return *this;
    }
    row_array& operator=(row_array&& o) noexcept {
        row_array tmp(std::move(o));
        swap(tmp);
        return *this;
    }
    ~row_array() { release(); }

    [[nodiscard]] std::size_t size() const noexcept { return rows_.size(); }
    [[nodiscard]] bool empty() const noexcept { return rows_.empty(); }
    /// Row r: entries writable through a mutable array, read-only through a const one.
    [[nodiscard]] const row& operator[](std::size_t r) noexcept { return rows_[r]; }
    [[nodiscard]] const_row operator[](std::size_t r) const noexcept { return rows_[r]; }
    [[nodiscard]] auto begin() noexcept { return rows_.cbegin(); }
    [[nodiscard]] auto end() noexcept { return rows_.cend(); }
    [[nodiscard]] const_iterator begin() const noexcept { return const_iterator(rows_.cbegin()); }
    [[nodiscard]] const_iterator end() const noexcept { return const_iterator(rows_.cend()); }
    /// Entries in all rows.
    [[nodiscard]] std::size_t used() const noexcept { return rows_.empty() ? 0 : static_cast<std::size_t>(rows_.back().data() + rows_.back().size() - data_); }

    /// Empties the array for `rows` rows of at most `capacity` entries in all and returns where the
    /// first row's entries go; keeps the buffer when it is large enough.
    T* start(std::size_t rows, std::size_t capacity) {
        rows_.clear();
        rows_.reserve(rows);
        if (capacity > capacity_) {
            release();
            data_ = huge_page_allocator<T>{}.allocate(capacity);
            capacity_ = capacity;
        }
        next_ = data_;
        return data_;
    }
    /// Ends the current row at `end` (its entries are [the previous row's end, end)); returns
    /// where the next row's entries go.
    T* end_row(T* end) noexcept {
        rows_.emplace_back(next_, static_cast<std::size_t>(end - next_));
        next_ = end;
        return end;
    }
    /// Appends the row [begin, end): entries the producer wrote in the buffer at or after the
    /// previous row's end (rows written side by side may leave gaps between them).
    T* add_row(T* begin, T* end) noexcept {
        rows_.emplace_back(begin, static_cast<std::size_t>(end - begin));
        next_ = end;
        return end;
    }
    /// Empties the array (keeps the buffer).
    void clear() noexcept { rows_.clear(); }

    void swap(row_array& o) noexcept {
        std::swap(data_, o.data_);
        std::swap(capacity_, o.capacity_);
        std::swap(next_, o.next_);
        rows_.swap(o.rows_);
    }

private:
    void release() noexcept {
        if (data_) huge_page_allocator<T>{}.deallocate(data_, capacity_);
        data_ = next_ = nullptr;
        capacity_ = 0;
        rows_.clear();
    }

    T* data_ = nullptr;
    T* next_ = nullptr;
    std::size_t capacity_ = 0;
    std::vector<row> rows_;
};

}  // namespace pipeplan
