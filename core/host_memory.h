#pragma once
// What this machine can hold, checked before an input's sizes are allocated: a
// config.json, a make-model flag or an engine setting may ask for any amount, and
// allocating first would end in std::bad_alloc (or the OOM killer) instead of a message.
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/status.h"

namespace servelab {

// Physical memory of this machine in bytes (sysconf); 0 when the system does not say.
int64_t HostMemoryBytes();

// Ok when `bytes` (a double, so that a product of input sizes cannot overflow on its way
// here) fit in this machine's physical memory; otherwise InvalidArgument:
// "<what>: 1024.00 GiB, more than this machine's 23.47 GiB of memory".
Status CheckFitsHostMemory(double bytes, const std::string& what);

// Ok when `bytes` fit in the free space of the filesystem that holds `path` (or would hold
// it: the nearest folder above it that exists); otherwise InvalidArgument naming both.
Status CheckFitsDisk(double bytes, const std::filesystem::path& path, const std::string& what);

}  // namespace servelab
