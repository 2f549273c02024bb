#include "runtime/compile_cache.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>

#include "common/error.h"
#include "compiler/serialize.h"
#include "runtime/sha256.h"

#ifndef PJRTX_VERSION
#define PJRTX_VERSION "dev"
#endif

namespace pjrtx::runtime {

namespace {

int64_t region_bytes(const compiler::Region& r) {
  int64_t n = 0;
  for (const auto& inst : r.body) {
    for (const auto& [name, value] : inst.attrs)
      if (auto* d = std::get_if<std::shared_ptr<const compiler::DenseData>>(&value); d && *d)
        n += static_cast<int64_t>((*d)->bytes.size());
    for (const auto& sub : inst.regions) n += region_bytes(sub);
  }
  return n;
}

bool region_has_callbacks(const compiler::Region& r) {
  for (const auto& inst : r.body) {
    if (inst.op == compiler::Opcode::custom_call &&
        inst.attr_str("call_target_name", "") == "pjrtx_callback")
      return true;
    for (const auto& sub : inst.regions)
      if (region_has_callbacks(sub)) return true;
  }
  return false;
}

std::atomic<int64_t> g_frontend_runs{0}, g_cache_hits{0}, g_deserialized{0}, g_serialized{0};

std::mutex g_plans_mu;
std::map<std::string, std::weak_ptr<const compiler::Plan>>& plans() {
  static auto* m = new std::map<std::string, std::weak_ptr<const compiler::Plan>>();
  return *m;
}

}  // namespace

bool plan_has_host_callbacks(const compiler::Plan& plan) {
  for (const auto& f : plan.functions)
    if (region_has_callbacks(f.body)) return true;
  return false;
}

int64_t plan_constant_bytes(const compiler::Plan& plan) {
  int64_t n = 0;
  for (const auto& f : plan.functions) n += region_bytes(f.body);
  return n;
}

std::shared_ptr<const CompiledProgram> CompileCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.entry;
}

void CompileCache::insert(const std::string& key, std::shared_ptr<const CompiledProgram> entry) {
  // A program with host callbacks holds its callback ids (pjrtx/jax_rules/
  // callbacks.py frees an id when the executable and its keepalive are
  // gone); a cached copy would keep every such id alive.
  if (plan_has_host_callbacks(*entry->plan)) return;
  int64_t bytes = plan_constant_bytes(*entry->plan);
  if (max_entries_ == 0 || bytes > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = slots_.find(key); it != slots_.end()) {
    // Two threads compiled the same program at once: keep the first.
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  lru_.push_front(key);
  slots_.emplace(key, Slot{std::move(entry), bytes, lru_.begin()});
  bytes_ += bytes;
  while (slots_.size() > max_entries_ || bytes_ > max_bytes_) {
    auto victim = slots_.find(lru_.back());
    bytes_ -= victim->second.bytes;
    slots_.erase(victim);
    lru_.pop_back();
  }
}

void CompileCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  slots_.clear();
  lru_.clear();
  bytes_ = 0;
}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slots_.size();
}

CompileStats compile_stats() {
  return {g_frontend_runs.load(), g_cache_hits.load(), g_deserialized.load(), g_serialized.load()};
}
void count_frontend_run() { ++g_frontend_runs; }
void count_cache_hit() { ++g_cache_hits; }
void count_deserialized() { ++g_deserialized; }
void count_serialized() { ++g_serialized; }

void register_plan(const std::string& fingerprint,
                   const std::shared_ptr<const compiler::Plan>& plan) {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  auto& m = plans();
  // Drop entries whose plans died, so the map stays as small as the set of
  // live executables.
  for (auto it = m.begin(); it != m.end();) it = it->second.expired() ? m.erase(it) : std::next(it);
  m[fingerprint] = plan;
}

std::shared_ptr<const compiler::Plan> find_plan(const std::string& fingerprint) {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  auto it = plans().find(fingerprint);
  return it == plans().end() ? nullptr : it->second.lock();
}

// ---- serialized executables ----------------------------------------------

namespace {

constexpr char kExeMagic[8] = {'P', 'J', 'R', 'T', 'X', 'E', 'X', 'E'};
// 2: the device assignment follows the fingerprint.
constexpr uint32_t kExeVersion = 2;

// The build that wrote a blob must be the build that reads it: the plan is
// the frontend's output, and another pjrtx may build another plan from the
// same program (or lower an opcode differently). JAX's cache key includes
// the platform version, which names the pjrtx version, so a mismatch here
// means a copied or hand-made cache entry.
std::string producer() {
  return std::string("pjrtx ") + (PJRTX_VERSION[0] != '\0' ? PJRTX_VERSION : "dev") +
         " plan format " + std::to_string(compiler::kPlanFormatVersion);
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

struct Cursor {
  std::string_view b;
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) {
    invalid_argument("pjrtx: serialized executable: ", args...);
  }
  std::string_view take(size_t n, const char* what) {
    if (n > b.size()) fail("truncated ", what, " (", b.size(), " bytes left, needs ", n, ")");
    std::string_view s = b.substr(0, n);
    b.remove_prefix(n);
    return s;
  }
  uint32_t u32(const char* what) {
    std::string_view s = take(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(s[i])) << (8 * i);
    return v;
  }
  std::string_view str(const char* what) { return take(u32(what), what); }
};

}  // namespace

std::string pack_executable(const std::string& fingerprint, const compiler::Plan& plan,
                            const DeviceAssignment& assignment) {
  // A callback id names a Python function of this process only; JAX keeps
  // such programs out of its persistent cache for the same reason.
  if (plan_has_host_callbacks(plan))
    invalid_argument("pjrtx: cannot serialize ", plan.name,
                     ": it calls Python host callbacks, which exist only in this process");
  std::string payload = compiler::serialize_plan(plan);
  std::string out(kExeMagic, sizeof(kExeMagic));
  put_u32(out, kExeVersion);
  put_str(out, producer());
  put_str(out, fingerprint);
  put_u32(out, static_cast<uint32_t>(assignment.num_replicas));
  put_u32(out, static_cast<uint32_t>(assignment.num_partitions));
  put_u32(out, static_cast<uint32_t>(assignment.device_ids.size()));
  for (int id : assignment.device_ids) put_u32(out, static_cast<uint32_t>(id));
  auto digest = Sha256().update(payload).digest();
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  out += payload;
  return out;
}

UnpackedExecutable unpack_executable(std::string_view bytes) {
  Cursor c{bytes};
  if (bytes.size() < sizeof(kExeMagic) || std::memcmp(bytes.data(), kExeMagic, sizeof(kExeMagic)))
    c.fail("not a pjrtx executable (bad magic; ", bytes.size(), " bytes)");
  c.take(sizeof(kExeMagic), "magic");
  uint32_t version = c.u32("version");
  if (version != kExeVersion)
    c.fail("version ", version, ", this pjrtx reads version ", kExeVersion,
           "; recompile the program");
  std::string_view who = c.str("producer");
  if (who != producer()) {
    // Printable ASCII only: the name reaches Python, which decodes UTF-8.
    std::string shown;
    for (char ch : who.substr(0, 80)) shown += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
    c.fail("written by '", shown, "', this is '", producer(), "'; recompile the program");
  }
  UnpackedExecutable out;
  out.fingerprint = std::string(c.str("fingerprint"));
  out.assignment.num_replicas = static_cast<int>(c.u32("num_replicas"));
  out.assignment.num_partitions = static_cast<int>(c.u32("num_partitions"));
  uint32_t n = c.u32("device count");
  if (n != static_cast<uint32_t>(out.assignment.num_devices()) || n == 0 || n > 1u << 16)
    c.fail("a device assignment of ", n, " ids for ", out.assignment.num_replicas, " x ",
           out.assignment.num_partitions, " devices");
  for (uint32_t i = 0; i < n; ++i)
    out.assignment.device_ids.push_back(static_cast<int>(c.u32("device id")));
  std::string_view digest = c.take(32, "checksum");
  auto actual = Sha256().update(c.b).digest();
  if (std::memcmp(digest.data(), actual.data(), actual.size()) != 0)
    c.fail("checksum mismatch (the bytes were changed or cut short)");
  out.plan = compiler::deserialize_plan(c.b);
  return out;
}

}  // namespace pjrtx::runtime
