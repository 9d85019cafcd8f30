// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: libfuse.h
// -----------------------------------------------------------------------------
//
// libfuse3's low-level API at the one version the adaptor is written
// against (3.12 API, as libfuse 3.14 provides it). Every file of the adaptor
// includes libfuse through this header, so they all see the same API.
#ifndef LARDER_FUSE_LIBFUSE_H_
#define LARDER_FUSE_LIBFUSE_H_

#define FUSE_USE_VERSION 312

#include <fuse3/fuse_lowlevel.h>

#endif  // LARDER_FUSE_LIBFUSE_H_
