// The cluster port's handshake on the wire, read and written only here (link_listener.cc, link_connector.cc).
//
// Lock-step: each side sends its next message only once it has read the other's, so neither ever receives a
// byte past the handshake before it hands the stream over.
//   hello   (client): magic "MGCL" (4), version (1), channel (1), client nonce (16), client id (8, big endian),
//                     address length (2, big endian), address (1..255 bytes of printable ASCII)
//   welcome (server): magic "MGCL" (4), server nonce (16), server id (8, big endian), server MAC (32)
//   proof   (client): client MAC (32)
//   verdict (server): one byte, a Verdict
// server MAC = HMAC-SHA256(secret, "server" | hello | server nonce | server id)
// client MAC = HMAC-SHA256(secret, "client" | hello | welcome)
// After kAccepted the stream carries the channel's own bytes, both ways.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace magnetar::cluster::link_format {

inline constexpr std::string_view kMagic = "MGCL";
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMacBytes = 32;
inline constexpr size_t kMaxAddressBytes = 255;
inline constexpr size_t kHelloHeadBytes = 4 + 1 + 1 + kNonceBytes + 8 + 2;  // hello up to the address
inline constexpr size_t kWelcomeBytes = 4 + kNonceBytes + 8 + kMacBytes;
inline constexpr size_t kProofBytes = kMacBytes;
inline constexpr size_t kVerdictBytes = 1;
inline constexpr std::string_view kServerMacLabel = "server";
inline constexpr std::string_view kClientMacLabel = "client";

enum class Verdict : uint8_t {
  kAccepted = 0,
  kNoHandler = 1,  // authenticated, but the channel is not served on this port
};

struct HelloHead {
  uint8_t version = 0;
  uint8_t channel = 0;
  std::string_view nonce;  // points into the decoded bytes
  uint64_t id = 0;
  uint16_t address_bytes = 0;
};

inline void put_u64(std::string& out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

inline uint64_t get_u64(std::string_view in) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; i++) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

inline bool is_valid_address(std::string_view address) {
  if (address.empty() || address.size() > kMaxAddressBytes) return false;
  for (char c : address) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// REQUIRES: nonce.size() == kNonceBytes, is_valid_address(address).
inline std::string encode_hello(uint8_t channel, std::string_view nonce, uint64_t id, std::string_view address) {
  std::string out;
  out.reserve(kHelloHeadBytes + address.size());
  out.append(kMagic);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(channel));
  out.append(nonce);
  put_u64(out, id);
  out.push_back(static_cast<char>(address.size() >> 8));
  out.push_back(static_cast<char>(address.size() & 0xff));
  out.append(address);
  return out;
}

// Decodes the first kHelloHeadBytes of a hello. False, with `why` set, when it is not one this version reads.
inline bool decode_hello_head(std::string_view in, HelloHead* head, std::string_view* why) {
  if (in.size() != kHelloHeadBytes || in.substr(0, 4) != kMagic) {
    *why = "wrong magic";
    return false;
  }
  head->version = static_cast<uint8_t>(in[4]);
  if (head->version != kVersion) {
    *why = "unsupported version";
    return false;
  }
  head->channel = static_cast<uint8_t>(in[5]);
  head->nonce = in.substr(6, kNonceBytes);
  head->id = get_u64(in.substr(6 + kNonceBytes, 8));
  head->address_bytes = static_cast<uint16_t>((static_cast<unsigned char>(in[14 + kNonceBytes]) << 8) |
                                              static_cast<unsigned char>(in[15 + kNonceBytes]));
  if (head->id == 0) {
    *why = "server id 0";
    return false;
  }
  if (head->address_bytes == 0 || head->address_bytes > kMaxAddressBytes) {
    *why = "address length out of range";
    return false;
  }
  return true;
}

// What the server MAC covers.
inline std::string server_mac_input(std::string_view hello, std::string_view server_nonce, uint64_t server_id) {
  std::string out;
  out.reserve(kServerMacLabel.size() + hello.size() + server_nonce.size() + 8);
  out.append(kServerMacLabel);
  out.append(hello);
  out.append(server_nonce);
  put_u64(out, server_id);
  return out;
}

// REQUIRES: mac.size() == kMacBytes.
inline std::string encode_welcome(std::string_view server_nonce, uint64_t server_id, std::string_view mac) {
  std::string out;
  out.reserve(kWelcomeBytes);
  out.append(kMagic);
  out.append(server_nonce);
  put_u64(out, server_id);
  out.append(mac);
  return out;
}

// What the client MAC covers.
inline std::string client_mac_input(std::string_view hello, std::string_view welcome) {
  std::string out;
  out.reserve(kClientMacLabel.size() + hello.size() + welcome.size());
  out.append(kClientMacLabel);
  out.append(hello);
  out.append(welcome);
  return out;
}

}  // namespace magnetar::cluster::link_format
