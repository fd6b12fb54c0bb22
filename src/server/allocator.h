// Allocator settings for a long-running node (glibc malloc).
//
// A reactor allocates each stored entry (tens of KiB to a few MiB) from its
// own malloc arena and the journal's sync thread frees it once the entry is
// durable. glibc gives an arena's heap back (munmap) as soon as it empties
// and maps a new one (mmap, mprotect) at the next allocation, so a steady
// publish stream at a heap boundary maps and unmaps heaps dozens of times a
// second: each munmap takes the process's memory map lock for writing and
// interrupts every other core to flush its TLB, while the reactor growing
// the next heap waits for that lock (milliseconds on a busy virtual machine).
// Keeping a top pad as large as a heap (64 MiB) keeps emptied heaps mapped;
// the pages stay free for the next entries, and housekeeping's malloc_trim
// still hands free pages back to the system.
#pragma once

namespace magnetar::server {

// Process-wide; call once before the reactors start. Leaves the settings
// alone when the operator chose a top pad (GLIBC_TUNABLES glibc.malloc.top_pad
// or MALLOC_TOP_PAD_). Returns whether it changed anything.
bool tune_allocator();

}  // namespace magnetar::server
