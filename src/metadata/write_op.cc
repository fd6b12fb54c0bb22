#include "metadata/write_op.h"

#include <chrono>

#include "metadata/records_generated.h"

namespace magnetar::metadata {

using common::Result;
using common::Status;

namespace {

constexpr uint16_t kMaxFormat = 1;  // newest record format this binary reads

flatbuffers::Offset<flatbuffers::Vector<uint8_t>> bytes_vector(flatbuffers::FlatBufferBuilder& b,
                                                               std::string_view s) {
  return b.CreateVector(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string finish(flatbuffers::FlatBufferBuilder& b) {
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

template <typename T>
const T* verified_root(std::string_view bytes) {
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!verifier.VerifyBuffer<T>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<T>(bytes.data());
}

}  // namespace

std::string encode_write_op(const WriteOp& op) {
  flatbuffers::FlatBufferBuilder b(128 + op.key.size() + op.value.size());
  auto key = b.CreateString(op.key);
  auto value = bytes_vector(b, op.value);
  fb::WriteOpBuilder w(b);
  w.add_kind(static_cast<fb::OpKind>(op.kind));
  w.add_key(key);
  w.add_value(value);
  w.add_expected_version(op.expected_version);
  w.add_session(op.session);
  w.add_now_ms(op.now_ms);
  b.Finish(w.Finish());
  return finish(b);
}

Result<WriteOp> decode_write_op(std::string_view bytes) {
  const auto* r = verified_root<fb::WriteOp>(bytes);
  if (r == nullptr) return Status::corruption("metadata write op fails verification");
  if (r->format() > kMaxFormat) {
    return Status::corruption("metadata write op has format " + std::to_string(r->format()) +
                              ", newer than this binary reads");
  }
  if (r->kind() > fb::OpKind::MAX) return Status::corruption("unknown metadata write op kind");
  WriteOp op;
  op.kind = static_cast<WriteOp::Kind>(r->kind());
  if (r->key()) op.key = r->key()->str();
  if (r->value()) op.value.assign(reinterpret_cast<const char*>(r->value()->data()), r->value()->size());
  op.expected_version = r->expected_version();
  op.session = r->session();
  op.now_ms = r->now_ms();
  return op;
}

std::string encode_node(const Stat& stat, std::string_view value) {
  flatbuffers::FlatBufferBuilder b(64 + value.size());
  auto v = bytes_vector(b, value);
  fb::NodeBuilder n(b);
  n.add_version(stat.version);
  n.add_created_ms(stat.created_ms);
  n.add_modified_ms(stat.modified_ms);
  n.add_session(stat.session);
  n.add_value(v);
  b.Finish(n.Finish());
  return finish(b);
}

Status decode_node(std::string_view bytes, Stat& stat, std::string* value) {
  const auto* n = verified_root<fb::Node>(bytes);
  if (n == nullptr) return Status::corruption("metadata node fails verification");
  if (n->format() > kMaxFormat) return Status::corruption("metadata node is newer than this binary reads");
  stat.version = n->version();
  stat.created_ms = n->created_ms();
  stat.modified_ms = n->modified_ms();
  stat.session = n->session();
  if (value) {
    value->clear();
    if (n->value()) value->assign(reinterpret_cast<const char*>(n->value()->data()), n->value()->size());
  }
  return Status::ok();
}

}  // namespace magnetar::metadata
