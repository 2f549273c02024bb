// The executable plan: what the frontend builds from StableHLO and the back
// end lowers. Values are numbered per plan and carry a TensorType; an
// instruction has an opcode from opcodes.h, typed attributes, operands,
// results and nested regions (reduce bodies, while/case branches, ...).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "compiler/opcodes.h"
#include "compiler/types.h"

namespace pjrtx::compiler {

using ValueId = int32_t;

// Where DenseBytes live. The MLX back end installs its allocator
// (backend/mlx/constant_pool.cc), so a constant's MLX array is a view of the
// plan's own bytes and a weight is held once; without one, malloc/free.
// alloc returns the data pointer and sets *handle (the allocator's buffer).
struct DenseStorage {
  uint8_t* (*alloc)(size_t n, void** handle);
  void (*release)(void* handle, uint8_t* data);
  // Smaller data uses malloc: padding, shapes and scalars are read on the
  // host, and a Metal buffer per 16-byte attribute would waste pages.
  size_t min_bytes = 0;
};
void set_dense_storage(const DenseStorage* storage);

// The bytes of a DenseData: a vector-like owner of storage from the
// installed DenseStorage (copies copy the bytes).
class DenseBytes {
 public:
  DenseBytes() = default;
  DenseBytes(const DenseBytes& other) { assign(other.begin(), other.end()); }
  DenseBytes& operator=(const DenseBytes& other);
  DenseBytes(DenseBytes&& other) noexcept { swap(other); }
  DenseBytes& operator=(DenseBytes&& other) noexcept;
  ~DenseBytes() { reset(); }

  const uint8_t* data() const { return data_; }
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }
  void assign(const uint8_t* first, const uint8_t* last);
  // Grows (zero-filled) or shrinks, keeping the first min(n, size()) bytes.
  void resize(size_t n);
  // The storage's buffer handle (an MLX allocator buffer), or nullptr.
  void* handle() const { return handle_; }
  // The storage these bytes came from (to check it is the one a back end
  // installed before treating handle() as its own).
  const DenseStorage* storage() const { return storage_; }

 private:
  void reset();
  void swap(DenseBytes& o) noexcept;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* handle_ = nullptr;
  const DenseStorage* storage_ = nullptr;
};

// Dense element data (constants, dense attributes), in row-major order.
// A splat holds exactly one element.
struct DenseData {
  TensorType type;
  bool splat = false;
  DenseBytes bytes;
};

using AttrValue =
    std::variant<std::monostate, bool, int64_t, double, std::string,
                 std::vector<int64_t>, std::vector<double>,
                 std::vector<std::string>, std::shared_ptr<const DenseData>>;

std::string attr_to_string(const AttrValue& v);

struct Instruction;

struct Region {
  std::vector<ValueId> params;
  std::vector<Instruction> body;
  std::vector<ValueId> returns;
};

struct Instruction {
  Opcode op;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  std::map<std::string, AttrValue, std::less<>> attrs;
  std::vector<Region> regions;
  std::string loc;  // MLIR location text, for error messages

  // Typed attribute accessors; they throw an INVALID_ARGUMENT error naming
  // the op and attribute when it is missing or of another kind.
  bool has(std::string_view name) const { return attrs.find(name) != attrs.end(); }
  int64_t attr_int(std::string_view name) const;
  int64_t attr_int(std::string_view name, int64_t dflt) const;
  bool attr_bool(std::string_view name, bool dflt) const;
  double attr_float(std::string_view name) const;
  const std::string& attr_str(std::string_view name) const;
  std::string attr_str(std::string_view name, const std::string& dflt) const;
  const std::vector<int64_t>& attr_ints(std::string_view name) const;
  std::vector<int64_t> attr_ints(std::string_view name,
                                 const std::vector<int64_t>& dflt) const;
  const DenseData& attr_dense(std::string_view name) const;
  // The same data, shared: a constant's MLX array is a view of these bytes
  // and keeps them alive (backend/mlx/ops/constant.cc).
  const std::shared_ptr<const DenseData>& attr_dense_ptr(std::string_view name) const;
  // A dense integer attribute (padding, replica groups, pairs, ...) as one
  // int64 per element in row-major order: a splat is expanded to the
  // attribute's shape, any integer element type is widened, and anything
  // else (floats, a byte count that does not fit the type) is an
  // INVALID_ARGUMENT naming the op and attribute. Every lowering that reads
  // a dense attribute as an array reads it through this.
  std::vector<int64_t> attr_dense_ints(std::string_view name) const;

  // "stablehlo.add at loc(...)"
  std::string where() const;
};

struct Function {
  std::string name;
  bool is_public = false;
  Region body;
  std::vector<TensorType> result_types;
  // Parameter i may be donated (`tf.aliasing_output` or `jax.buffer_donor`
  // on the argument): the run takes over its buffer. Empty = none.
  std::vector<bool> donors;
  // The `mhlo.memory_kind` of each argument and result ("device",
  // "pinned_host", ...; "" where the program names none). Empty vectors
  // when no argument or result names one.
  std::vector<std::string> arg_memory_kinds, result_memory_kinds;
  // Serialized xla.OpSharding of each argument and result of a program
  // partitioned over several devices (the frontend's choice, which JAX
  // reads back for the outputs it left to the compiler). Empty otherwise.
  std::vector<std::string> arg_shardings, result_shardings;
};

struct Plan {
  std::string name;                // the module's name, e.g. "jit_f"
  std::vector<TensorType> values;  // indexed by ValueId
  std::vector<Function> functions;
  int entry = -1;                  // index of the entry function ("main")

  const TensorType& type(ValueId v) const { return values.at(v); }
  const Function& entry_function() const { return functions.at(entry); }
  const Function* find_function(std::string_view name) const;
  size_t num_instructions() const;
};

}  // namespace pjrtx::compiler
