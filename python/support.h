// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: support.h
// -----------------------------------------------------------------------------
//
// What larder._native (native.cc) needs around the client library: raising
// larder.errors from a status, larder.Client's keyword options, and bytes
// objects and buffers filled without the GIL.
#ifndef LARDER_PYTHON_SUPPORT_H_
#define LARDER_PYTHON_SUPPORT_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "larder/client.h"

namespace larder {

namespace py = pybind11;

// Raises the larder.errors class for `status` (GIL held).
[[noreturn]] void Raise(const absl::Status& status, const std::string& path);

template <typename T>
T ValueOrRaise(absl::StatusOr<T> r, const std::string& path) {
  if (!r.ok()) Raise(r.status(), path);
  return *std::move(r);
}

inline void OkOrRaise(const absl::Status& st, const std::string& path) {
  if (!st.ok()) Raise(st, path);
}

// ClientOptions from larder.Client's keyword arguments: names as in
// ClientOptions, durations in seconds, the client fields of SecurityOptions
// by their own names; and read_threads, which is the module's own. An
// unknown one is a TypeError that lists the known ones.
ClientOptions OptionsFrom(const std::string& master, const py::dict& kw,
                          int* read_threads);

// Seconds since the Unix epoch.
double ToSeconds(absl::Time t);

// A writable, contiguous buffer of the caller's (bytearray, memoryview,
// NumPy array), released when this goes out of scope.
class WritableBuffer {
 public:
  explicit WritableBuffer(py::handle obj);
  ~WritableBuffer() { PyBuffer_Release(&view_); }
  WritableBuffer(const WritableBuffer&) = delete;
  WritableBuffer& operator=(const WritableBuffer&) = delete;
  absl::Span<char> span() {
    return absl::Span<char>(static_cast<char*>(view_.buf),
                            static_cast<size_t>(view_.len));
  }

 private:
  Py_buffer view_;
};

// A bytes object of exactly `size` bytes, to be filled without the GIL.
py::bytes NewBytes(size_t size);
absl::Span<char> BytesSpan(py::bytes& b);
// Shrinks `b` to `n` bytes (a short read at the end of a file).
void ShrinkBytes(py::bytes& b, size_t n);

// Lets glibc's heap keep a batch's worth of freed memory (see support.cc).
void KeepHeapForBatch(uint64_t batch_bytes);

}  // namespace larder

#endif  // LARDER_PYTHON_SUPPORT_H_
