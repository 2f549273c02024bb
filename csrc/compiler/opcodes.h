// The one table of plan opcodes: every StableHLO op (plus func.call) the plan
// can represent. Whether the back end can lower an opcode is the back end's
// registry's business, so an op that parses but has no lowering fails at
// compile time with its name and location.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pjrtx::compiler {

#define PJRTX_OPCODES(X)                                                  \
  X(abs, "stablehlo.abs")                                                 \
  X(add, "stablehlo.add")                                                 \
  X(after_all, "stablehlo.after_all")                                     \
  X(all_gather, "stablehlo.all_gather")                                   \
  X(all_reduce, "stablehlo.all_reduce")                                   \
  X(all_to_all, "stablehlo.all_to_all")                                   \
  X(and_, "stablehlo.and")                                                \
  X(atan2, "stablehlo.atan2")                                             \
  X(batch_norm_grad, "stablehlo.batch_norm_grad")                         \
  X(batch_norm_inference, "stablehlo.batch_norm_inference")               \
  X(batch_norm_training, "stablehlo.batch_norm_training")                 \
  X(bitcast_convert, "stablehlo.bitcast_convert")                         \
  X(broadcast, "stablehlo.broadcast")                                     \
  X(broadcast_in_dim, "stablehlo.broadcast_in_dim")                       \
  X(case_, "stablehlo.case")                                              \
  X(cbrt, "stablehlo.cbrt")                                               \
  X(ceil, "stablehlo.ceil")                                               \
  X(cholesky, "stablehlo.cholesky")                                       \
  X(clamp, "stablehlo.clamp")                                             \
  X(collective_broadcast, "stablehlo.collective_broadcast")               \
  X(collective_permute, "stablehlo.collective_permute")                   \
  X(compare, "stablehlo.compare")                                         \
  X(complex, "stablehlo.complex")                                         \
  X(composite, "stablehlo.composite")                                     \
  X(concatenate, "stablehlo.concatenate")                                 \
  X(constant, "stablehlo.constant")                                       \
  X(convert, "stablehlo.convert")                                         \
  X(convolution, "stablehlo.convolution")                                 \
  X(cosine, "stablehlo.cosine")                                           \
  X(count_leading_zeros, "stablehlo.count_leading_zeros")                 \
  X(create_token, "stablehlo.create_token")                               \
  X(custom_call, "stablehlo.custom_call")                                 \
  X(divide, "stablehlo.divide")                                           \
  X(dot, "stablehlo.dot")                                                 \
  X(dot_general, "stablehlo.dot_general")                                 \
  X(dynamic_broadcast_in_dim, "stablehlo.dynamic_broadcast_in_dim")       \
  X(dynamic_conv, "stablehlo.dynamic_conv")                               \
  X(dynamic_gather, "stablehlo.dynamic_gather")                           \
  X(dynamic_iota, "stablehlo.dynamic_iota")                               \
  X(dynamic_pad, "stablehlo.dynamic_pad")                                 \
  X(dynamic_reshape, "stablehlo.dynamic_reshape")                         \
  X(dynamic_slice, "stablehlo.dynamic_slice")                             \
  X(dynamic_update_slice, "stablehlo.dynamic_update_slice")               \
  X(einsum, "stablehlo.einsum")                                           \
  X(exponential, "stablehlo.exponential")                                 \
  X(exponential_minus_one, "stablehlo.exponential_minus_one")             \
  X(fft, "stablehlo.fft")                                                 \
  X(floor, "stablehlo.floor")                                             \
  X(gather, "stablehlo.gather")                                           \
  X(get_dimension_size, "stablehlo.get_dimension_size")                   \
  X(get_tuple_element, "stablehlo.get_tuple_element")                     \
  X(if_, "stablehlo.if")                                                  \
  X(imag, "stablehlo.imag")                                               \
  X(infeed, "stablehlo.infeed")                                           \
  X(iota, "stablehlo.iota")                                               \
  X(is_finite, "stablehlo.is_finite")                                     \
  X(log, "stablehlo.log")                                                 \
  X(log_plus_one, "stablehlo.log_plus_one")                               \
  X(logistic, "stablehlo.logistic")                                       \
  X(map, "stablehlo.map")                                                 \
  X(maximum, "stablehlo.maximum")                                         \
  X(minimum, "stablehlo.minimum")                                         \
  X(multiply, "stablehlo.multiply")                                       \
  X(negate, "stablehlo.negate")                                           \
  X(not_, "stablehlo.not")                                                \
  X(optimization_barrier, "stablehlo.optimization_barrier")               \
  X(or_, "stablehlo.or")                                                  \
  X(outfeed, "stablehlo.outfeed")                                         \
  X(pad, "stablehlo.pad")                                                 \
  X(partition_id, "stablehlo.partition_id")                               \
  X(popcnt, "stablehlo.popcnt")                                           \
  X(power, "stablehlo.power")                                             \
  X(real, "stablehlo.real")                                               \
  X(real_dynamic_slice, "stablehlo.real_dynamic_slice")                   \
  X(recv, "stablehlo.recv")                                               \
  X(reduce, "stablehlo.reduce")                                           \
  X(reduce_precision, "stablehlo.reduce_precision")                       \
  X(reduce_scatter, "stablehlo.reduce_scatter")                           \
  X(reduce_window, "stablehlo.reduce_window")                             \
  X(remainder, "stablehlo.remainder")                                     \
  X(replica_id, "stablehlo.replica_id")                                   \
  X(reshape, "stablehlo.reshape")                                         \
  X(reverse, "stablehlo.reverse")                                         \
  X(rng, "stablehlo.rng")                                                 \
  X(rng_bit_generator, "stablehlo.rng_bit_generator")                     \
  X(round_nearest_afz, "stablehlo.round_nearest_afz")                     \
  X(round_nearest_even, "stablehlo.round_nearest_even")                   \
  X(rsqrt, "stablehlo.rsqrt")                                             \
  X(scatter, "stablehlo.scatter")                                         \
  X(select, "stablehlo.select")                                           \
  X(select_and_scatter, "stablehlo.select_and_scatter")                   \
  X(send, "stablehlo.send")                                               \
  X(shift_left, "stablehlo.shift_left")                                   \
  X(shift_right_arithmetic, "stablehlo.shift_right_arithmetic")           \
  X(shift_right_logical, "stablehlo.shift_right_logical")                 \
  X(sign, "stablehlo.sign")                                               \
  X(sine, "stablehlo.sine")                                               \
  X(slice, "stablehlo.slice")                                             \
  X(sort, "stablehlo.sort")                                               \
  X(sqrt, "stablehlo.sqrt")                                               \
  X(subtract, "stablehlo.subtract")                                       \
  X(tan, "stablehlo.tan")                                                 \
  X(tanh, "stablehlo.tanh")                                               \
  X(torch_index_select, "stablehlo.torch_index_select")                   \
  X(transpose, "stablehlo.transpose")                                     \
  X(triangular_solve, "stablehlo.triangular_solve")                       \
  X(tuple, "stablehlo.tuple")                                             \
  X(unary_einsum, "stablehlo.unary_einsum")                               \
  X(uniform_dequantize, "stablehlo.uniform_dequantize")                   \
  X(uniform_quantize, "stablehlo.uniform_quantize")                       \
  X(while_, "stablehlo.while")                                            \
  X(xor_, "stablehlo.xor")                                                \
  X(call, "func.call")                                                    \
  X(sdy_sharding_constraint, "sdy.sharding_constraint")                   \
  X(sdy_reshard, "sdy.reshard")                                           \
  X(fused_multiply_add, "pjrtx.fused_multiply_add")

enum class Opcode : uint16_t {
#define PJRTX_OPCODE_ENUM(id, name) id,
  PJRTX_OPCODES(PJRTX_OPCODE_ENUM)
#undef PJRTX_OPCODE_ENUM
  kCount
};

std::string_view opcode_name(Opcode op);
std::optional<Opcode> parse_opcode(std::string_view name);

}  // namespace pjrtx::compiler
