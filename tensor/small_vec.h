#pragma once
// SmallVec: a vector that keeps up to N elements inline. Shapes, strides and node inputs are
// short; keeping them off the heap makes recording an op a handful of allocations, not dozens.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace loom {

template <typename T, size_t N>
class SmallVec {
 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() = default;
  explicit SmallVec(size_t n) { resize(n); }
  SmallVec(size_t n, const T& v) { assign(n, v); }
  SmallVec(std::initializer_list<T> il) { append(il.begin(), il.end()); }
  template <typename It, typename = decltype(*std::declval<It>(), ++std::declval<It&>())>
  SmallVec(It first, It last) {
    append(first, last);
  }
  SmallVec(const std::vector<T>& v) { append(v.begin(), v.end()); }  // NOLINT: interop with Dims
  SmallVec(const SmallVec& o) {
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (o.ptr_ == reinterpret_cast<const T*>(o.buf_)) {  // inline: a few moves, no loop
        std::memcpy(buf_, o.buf_, sizeof(buf_));
        size_ = o.size_;
        return;
      }
    }
    append(o.begin(), o.end());
  }
  SmallVec(SmallVec&& o) noexcept { steal(std::move(o)); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      destroy();
      steal(std::move(o));
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> il) {
    clear();
    append(il.begin(), il.end());
    return *this;
  }
  ~SmallVec() { destroy(); }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* begin() { return ptr_; }
  T* end() { return ptr_ + size_; }
  const T* begin() const { return ptr_; }
  const T* end() const { return ptr_ + size_; }
  const T* cbegin() const { return ptr_; }
  const T* cend() const { return ptr_ + size_; }
  std::reverse_iterator<T*> rbegin() { return std::reverse_iterator<T*>(end()); }
  std::reverse_iterator<T*> rend() { return std::reverse_iterator<T*>(begin()); }
  T& operator[](size_t i) { return ptr_[i]; }
  const T& operator[](size_t i) const { return ptr_[i]; }
  T& at(size_t i) { return check(i), ptr_[i]; }
  const T& at(size_t i) const { return check(i), ptr_[i]; }
  T& front() { return ptr_[0]; }
  const T& front() const { return ptr_[0]; }
  T& back() { return ptr_[size_ - 1]; }
  const T& back() const { return ptr_[size_ - 1]; }

  void reserve(size_t n) {
    if (n <= cap_) return;
    size_t c = std::max(n, cap_ * 2);
    T* p = static_cast<T*>(::operator new(c * sizeof(T)));
    std::uninitialized_move(ptr_, ptr_ + size_, p);
    std::destroy(ptr_, ptr_ + size_);
    if (ptr_ != inline_ptr()) ::operator delete(ptr_);
    ptr_ = p, cap_ = c;
  }
  template <typename... A>
  T& emplace_back(A&&... a) {
    reserve(size_ + 1);
    new (ptr_ + size_) T(std::forward<A>(a)...);
    return ptr_[size_++];
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { ptr_[--size_].~T(); }
  void clear() {
    std::destroy(ptr_, ptr_ + size_);
    size_ = 0;
  }
  void resize(size_t n) { resize(n, T()); }
  void resize(size_t n, const T& v) {
    if (n < size_) {
      std::destroy(ptr_ + n, ptr_ + size_);
    } else {
      reserve(n);
      std::uninitialized_fill(ptr_ + size_, ptr_ + n, v);
    }
    size_ = n;
  }
  void assign(size_t n, const T& v) {
    clear();
    resize(n, v);
  }
  T* insert(const T* pos, const T& v) { return insert(pos, &v, &v + 1); }
  T* insert(const T* pos, std::initializer_list<T> il) { return insert(pos, il.begin(), il.end()); }
  template <typename It>
  T* insert(const T* pos, It first, It last) {
    size_t at = size_t(pos - ptr_);
    std::vector<T> tmp(first, last);  // the range may alias this vector
    size_t k = tmp.size();
    reserve(size_ + k);
    for (size_t i = 0; i < k; ++i) emplace_back(T());
    std::move_backward(ptr_ + at, ptr_ + size_ - k, ptr_ + size_);
    std::move(tmp.begin(), tmp.end(), ptr_ + at);
    return ptr_ + at;
  }
  T* erase(const T* pos) { return erase(pos, pos + 1); }
  T* erase(const T* first, const T* last) {
    size_t a = size_t(first - ptr_), b = size_t(last - ptr_);
    std::move(ptr_ + b, ptr_ + size_, ptr_ + a);
    resize(size_ - (b - a));
    return ptr_ + a;
  }

  // A loop, not std::equal: for integers that became a memcmp call, dearer than comparing the
  // one to four dims of most shapes (a shape test an op).
  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i)
      if (!(a.ptr_[i] == b.ptr_[i])) return false;
    return true;
  }
  friend bool operator!=(const SmallVec& a, const SmallVec& b) { return !(a == b); }
  friend bool operator<(const SmallVec& a, const SmallVec& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* inline_ptr() { return reinterpret_cast<T*>(buf_); }
  void check(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVec index");
  }
  // A counted range is copied after one reserve: shapes and views are copied several times
  // an op, and an emplace_back an element (a capacity check each) was most of it. The empty
  // asm on the index keeps GCC from turning the loop into a memmove call, dearer than the
  // loop for the one to four dims of most shapes.
  template <typename It>
  void append(It first, It last) {
    if constexpr (std::random_access_iterator<It> && std::is_trivially_copyable_v<T>) {
      size_t n = size_t(last - first);
      reserve(size_ + n);
      T* d = ptr_ + size_;
      for (size_t i = 0; i < n; ++i) {
        asm("" : "+r"(i));
        d[i] = first[i];
      }
      size_ += n;
    } else if constexpr (std::random_access_iterator<It>) {
      reserve(size_ + size_t(last - first));
      for (; first != last; ++first) ::new (ptr_ + size_++) T(*first);  // counted as made
    } else {
      for (; first != last; ++first) emplace_back(*first);
    }
  }
  void destroy() {
    clear();
    if (ptr_ != inline_ptr()) ::operator delete(ptr_);
    ptr_ = inline_ptr(), cap_ = N;
  }
  void steal(SmallVec&& o) {
    if (o.ptr_ != o.inline_ptr()) {
      ptr_ = o.ptr_, size_ = o.size_, cap_ = o.cap_;
      o.ptr_ = o.inline_ptr(), o.size_ = 0, o.cap_ = N;
    } else if constexpr (std::is_trivially_copyable_v<T>) {
      std::memcpy(buf_, o.buf_, sizeof(buf_));  // the whole inline buffer: no loop
      ptr_ = inline_ptr(), cap_ = N, size_ = o.size_;
      o.size_ = 0;
    } else {
      ptr_ = inline_ptr(), cap_ = N, size_ = 0;
      for (size_t i = 0; i < o.size_; ++i) {  // fits: o's elements are inline
        if constexpr (std::is_trivially_copyable_v<T>) asm("" : "+r"(i));  // no memmove call
        ::new (ptr_ + i) T(std::move(o.ptr_[i]));
      }
      size_ = o.size_;
      o.clear();
    }
  }
  alignas(T) unsigned char buf_[N * sizeof(T)];
  T* ptr_ = inline_ptr();
  size_t size_ = 0;
  size_t cap_ = N;
};

}  // namespace loom
