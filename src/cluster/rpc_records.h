// Reading and writing the rpc.fbs tables, in one place for every caller.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>
#include <string_view>

namespace magnetar::cluster {

// The table of type T that `bytes` hold, or null when they fail verification
// (a peer's bytes are never trusted).
template <typename T>
const T* verified_record(std::string_view bytes) {
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!verifier.VerifyBuffer<T>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<T>(bytes.data());
}

// The finished buffer of `b` as bytes to send.
inline std::string record_bytes(const flatbuffers::FlatBufferBuilder& b) {
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

}  // namespace magnetar::cluster
