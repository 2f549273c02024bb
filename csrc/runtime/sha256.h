// SHA-256 (FIPS 180-4, section 6.2), for executable cache keys and
// fingerprints: two different programs must never share a key, which a
// 64-bit std::hash cannot promise (and which differs between standard
// libraries, while a fingerprint may be compared across processes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pjrtx::runtime {

class Sha256 {
 public:
  Sha256();
  // Feeds bytes; may be called any number of times before digest().
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Feeds the length first, so that ("ab", "c") and ("a", "bc") differ.
  Sha256& update_field(std::string_view s);
  // The 32-byte digest; the object is spent afterwards.
  std::array<uint8_t, 32> digest();
  // The digest as 64 lower-case hex digits.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes fed so far
};

inline std::string sha256_hex(std::string_view s) { return Sha256().update(s).hex_digest(); }

}  // namespace pjrtx::runtime
