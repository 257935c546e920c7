#pragma once
// CHECKs for kernel preconditions (shapes, ids in range). A failure means the caller
// (the engine, which validated model files and requests at its boundary) has a bug, so it
// aborts with file:line. kernels/ depends on nothing of ours, hence its own macros
// rather than core's SERVELAB_CHECK.
#include <cstdio>
#include <cstdlib>

#define SERVELAB_KERNEL_CHECK(cond)                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// `fmt` is a printf format for the values that explain the failure.
#define SERVELAB_KERNEL_CHECK_MSG(cond, fmt, ...)                                     \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s (" fmt ")\n", __FILE__, __LINE__, \
                   #cond __VA_OPT__(, ) __VA_ARGS__);                                 \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)
