#include "server/allocator.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "common/logging.h"

namespace magnetar::server {
namespace {

// glibc's HEAP_MAX_SIZE on 64-bit: a pad this large never lets a heap go.
constexpr int kTopPad = 64 << 20;
// glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: as high as the sliding threshold goes.
constexpr int kMmapThreshold = 32 << 20;

bool operator_chose_top_pad() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.top_pad") != nullptr) return true;
  return std::getenv("MALLOC_TOP_PAD_") != nullptr;
}

}  // namespace

bool tune_allocator() {
  if (operator_chose_top_pad()) return false;
  if (mallopt(M_TOP_PAD, kTopPad) != 1) {
    MLOG_WARN("cannot set malloc's top pad; emptied heaps will be unmapped and mapped again");
    return false;
  }
  // Setting the top pad turns off glibc's sliding mmap threshold, which
  // would otherwise rise to the size of the large buffers freed: pin it
  // where it would slide to, or every buffer over 128 KiB (a read of a few
  // MiB, a large entry, a frame on the cluster link) is mapped afresh and
  // page-faulted in one page at a time.
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1) {
    MLOG_WARN("cannot set malloc's mmap threshold; large buffers will be mapped afresh each time");
  }
  return true;
}

}  // namespace magnetar::server
