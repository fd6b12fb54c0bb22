// CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78).
//
// Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at
// start-up), otherwise a slicing-by-8 table implementation. Both give the same
// results; tests check them against the RFC 3720 vectors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace magnetar::common::crc32c {

// Extends `crc` (the value returned for the bytes before) over `data`.
// extend(extend(0, a), b) == value(a + b).
uint32_t extend(uint32_t crc, const void* data, size_t size);

inline uint32_t value(const void* data, size_t size) { return extend(0, data, size); }
inline uint32_t value(std::string_view s) { return extend(0, s.data(), s.size()); }

// The two implementations, exposed for tests and benchmarks.
uint32_t extend_software(uint32_t crc, const void* data, size_t size);
// REQUIRES: hardware_available().
uint32_t extend_hardware(uint32_t crc, const void* data, size_t size);
bool hardware_available();

}  // namespace magnetar::common::crc32c
