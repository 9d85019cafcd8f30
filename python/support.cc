// Copyright 2026 The Larder Authors.
#include "python/support.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <map>

#include "absl/strings/str_cat.h"

namespace larder {

// Raises the larder.errors class for `status` (GIL held).
[[noreturn]] void Raise(const absl::Status& status, const std::string& path) {
  py::object errors = py::module_::import("larder.errors");
  py::object exc = errors.attr("from_status")(
      static_cast<int>(status.code()), std::string(status.message()), path);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

namespace {

absl::Duration Seconds(py::handle v) { return absl::Seconds(v.cast<double>()); }

// Python's keyword arguments of larder.Client, each with what it sets:
// names as in ClientOptions, durations in seconds, the client fields of
// SecurityOptions by their own names. One table, so a new option is one
// line and an unknown one is named with the list of known ones.
using OptionSetter = void (*)(ClientOptions&, py::handle);
const std::map<std::string, OptionSetter>& OptionSetters() {
  static const auto* setters = new std::map<std::string, OptionSetter>{
      {"node",
       [](ClientOptions& o, py::handle v) { o.node = v.cast<std::string>(); }},
      {"readahead_blocks",
       [](ClientOptions& o, py::handle v) {
         o.readahead_blocks = v.cast<int>();
       }},
      {"max_workers_per_block",
       [](ClientOptions& o, py::handle v) {
         o.max_workers_per_block = v.cast<int>();
       }},
      {"under_store_fallback",
       [](ClientOptions& o, py::handle v) {
         o.under_store_fallback = v.cast<bool>();
       }},
      {"worker_timeout",
       [](ClientOptions& o, py::handle v) { o.worker_timeout = Seconds(v); }},
      {"ring_refresh",
       [](ClientOptions& o, py::handle v) { o.ring_refresh = Seconds(v); }},
      {"parallel_reads",
       [](ClientOptions& o, py::handle v) {
         o.parallel_reads = v.cast<int>();
       }},
      {"metadata_cache_entries",
       [](ClientOptions& o, py::handle v) {
         o.metadata_cache_entries = v.cast<size_t>();
       }},
      {"metadata_cache_bytes",
       [](ClientOptions& o, py::handle v) {
         o.metadata_cache_bytes = v.cast<size_t>();
       }},
      {"metadata_stale_window",
       [](ClientOptions& o, py::handle v) {
         o.metadata_stale_window = Seconds(v);
       }},
      {"tls_ca_file",
       [](ClientOptions& o, py::handle v) {
         o.security.tls_ca_file = v.cast<std::string>();
       }},
      {"tls_cert_file",
       [](ClientOptions& o, py::handle v) {
         o.security.tls_cert_file = v.cast<std::string>();
       }},
      {"tls_key_file",
       [](ClientOptions& o, py::handle v) {
         o.security.tls_key_file = v.cast<std::string>();
       }},
      {"tls_server_name",
       [](ClientOptions& o, py::handle v) {
         o.security.tls_server_name = v.cast<std::string>();
       }},
      {"token_file",
       [](ClientOptions& o, py::handle v) {
         o.security.token_file = v.cast<std::string>();
       }},
  };
  return *setters;
}

}  // namespace

ClientOptions OptionsFrom(const std::string& master, const py::dict& kw,
                          int* read_threads) {
  ClientOptions o;
  o.master = master;
  for (auto item : kw) {
    const std::string key = item.first.cast<std::string>();
    if (key == "read_threads") {
      *read_threads = item.second.cast<int>();
      if (*read_threads < 1)
        throw py::value_error("larder.Client: read_threads must be >= 1");
      continue;
    }
    auto it = OptionSetters().find(key);
    if (it == OptionSetters().end()) {
      std::string known = "read_threads";
      for (const auto& [name, setter] : OptionSetters())
        absl::StrAppend(&known, ", ", name);
      throw py::type_error(absl::StrCat("larder.Client: unknown option '", key,
                                        "' (known: ", known, ")"));
    }
    it->second(o, item.second);
  }
  return o;
}

double ToSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

WritableBuffer::WritableBuffer(py::handle obj) {
  if (PyObject_GetBuffer(obj.ptr(), &view_,
                         PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS) != 0)
    throw py::error_already_set();
}

// A bytes object of exactly `size` bytes, to be filled without the GIL.
py::bytes NewBytes(size_t size) {
  PyObject* b =
      PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
  if (b == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::bytes>(b);
}
// Lets glibc's heap keep a batch's worth of freed memory. By default it
// returns the top of the heap to the kernel once 128 KiB of it is free, so a
// process that reads batch after batch of files (a DataLoader worker: 64
// files of 100 KiB, dropped after decoding) takes fresh pages each time, and
// every one of them is faulted in and zeroed before the copy: measured, a
// third of the loader's time. Raising the thresholds to the batch's size
// (at most 32 MiB, glibc's own bound for its dynamic threshold) keeps that
// memory in the process for the next batch. Only ever raised.
void KeepHeapForBatch(uint64_t batch_bytes) {
#if defined(__GLIBC__)
  constexpr uint64_t kMax = uint64_t{32} << 20;
  static std::atomic<uint64_t> kept{0};
  const uint64_t want = std::min(batch_bytes, kMax);
  uint64_t now = kept.load(std::memory_order_relaxed);
  if (want <= now || want < (uint64_t{256} << 10)) return;
  while (!kept.compare_exchange_weak(now, want)) {
    if (want <= now) return;
  }
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(want));
  ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * want));
#endif
}

absl::Span<char> BytesSpan(py::bytes& b) {
  return absl::Span<char>(PyBytes_AS_STRING(b.ptr()),
                          static_cast<size_t>(PyBytes_GET_SIZE(b.ptr())));
}
// Shrinks `b` to `n` bytes (a short read at the end of a file).
void ShrinkBytes(py::bytes& b, size_t n) {
  if (n == static_cast<size_t>(PyBytes_GET_SIZE(b.ptr()))) return;
  PyObject* p = b.release().ptr();
  if (_PyBytes_Resize(&p, static_cast<Py_ssize_t>(n)) != 0)
    throw py::error_already_set();
  b = py::reinterpret_steal<py::bytes>(p);
}

}  // namespace larder
