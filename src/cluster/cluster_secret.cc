#include "cluster/cluster_secret.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace magnetar::cluster {

using common::Result;
using common::Status;

namespace {

// A secret file is one line; anything this long is not one.
constexpr size_t kMaxSecretFileBytes = 4096;
// create_file writes this many random bytes.
constexpr size_t kNewSecretBytes = 32;

int secret_hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string secret_to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

bool secret_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

Status secret_file_error(const std::string& path, std::string_view why) {
  return Status::invalid_argument("cluster secret file " + path + ": " + std::string(why));
}

// Wipes `s` before it is released, so the secret does not linger in freed memory.
void secret_wipe(std::string& s) {
  OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}

}  // namespace

Result<ClusterSecret> ClusterSecret::load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      return secret_file_error(path, "does not exist (create one with create_file on one node and copy it to the "
                                     "others)");
    }
    return secret_file_error(path, std::string("cannot be opened: ") + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return secret_file_error(path, std::string("cannot be read: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return secret_file_error(path, "is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    return secret_file_error(path, std::string("is readable by group or others (mode ") + mode +
                                       "): chmod 600 " + path);
  }
  std::string text(kMaxSecretFileBytes + 1, '\0');
  size_t size = 0;
  while (size < text.size()) {
    ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      secret_wipe(text);
      return secret_file_error(path, std::string("cannot be read: ") + std::strerror(err));
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  ::close(fd);
  if (size > kMaxSecretFileBytes) {
    secret_wipe(text);
    return secret_file_error(path, "is too large to be a cluster secret");
  }
  size_t begin = 0;
  size_t end = size;
  while (begin < end && secret_is_space(text[begin])) begin++;
  while (end > begin && secret_is_space(text[end - 1])) end--;
  std::string_view hex(text.data() + begin, end - begin);
  if (hex.size() % 2 != 0) {
    secret_wipe(text);
    return secret_file_error(path, "is not hex text (odd number of digits)");
  }
  std::string key;
  key.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = secret_hex_digit(hex[i]);
    int lo = secret_hex_digit(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      secret_wipe(text);
      secret_wipe(key);
      return secret_file_error(path, "is not hex text");
    }
    key.push_back(static_cast<char>((hi << 4) | lo));
  }
  secret_wipe(text);
  if (key.size() < kMinBytes) {
    size_t got = key.size();
    secret_wipe(key);
    return secret_file_error(path, "is too short: " + std::to_string(got) + " bytes, at least " +
                                       std::to_string(kMinBytes) + " needed (" + std::to_string(kMinBytes * 2) +
                                       " hex digits)");
  }
  return ClusterSecret(std::move(key));
}

Status ClusterSecret::create_file(const std::string& path) {
  std::string bytes(kNewSecretBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size())) != 1) {
    return Status::internal("cluster secret: the random number generator failed");
  }
  std::string text = secret_to_hex(bytes) + "\n";
  secret_wipe(bytes);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    secret_wipe(text);
    if (err == EEXIST) return Status::already_exists("cluster secret file " + path + " already exists");
    return Status::from_errno(err, "create cluster secret file " + path);
  }
  // The umask can only take bits away; make the mode exact regardless.
  Status st;
  if (::fchmod(fd, 0600) != 0) st = Status::from_errno(errno, "chmod cluster secret file " + path);
  size_t written = 0;
  while (st.is_ok() && written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = Status::from_errno(errno, "write cluster secret file " + path);
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (st.is_ok() && ::fsync(fd) != 0) st = Status::from_errno(errno, "sync cluster secret file " + path);
  ::close(fd);
  secret_wipe(text);
  if (!st.is_ok()) ::unlink(path.c_str());
  return st;
}

ClusterSecret ClusterSecret::from_bytes(std::string bytes) { return ClusterSecret(std::move(bytes)); }

std::string ClusterSecret::mac(std::string_view data) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace magnetar::cluster
