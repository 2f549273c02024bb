// The host loop engine's array ops (emitter.h): pad, dot_general,
// reduce, gather (clamped starts), scatter (dropped out-of-range windows,
// combined by its region), sort (stable, by its comparator), and cholesky
// and triangular_solve (host/linalg_kernels.h, as the ops run outside loops),
// rng_bit_generator (the prelude's streams).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/mlx/loops/emitter.h"

namespace pjrtx::backend::loops::emitter {

void Emitter::emit_pad(const Instruction& inst) {
  const Shape& is = type(inst.operands[0]).shape;
  const Shape& os = type(inst.results[0]).shape;
  auto lo = inst.attr_ints("edge_padding_low");
  auto interior = inst.attr_ints("interior_padding");
  auto ost = strides_of(os);
  std::string r = decl(inst.results[0]);
  line(each(inst.results[0]) + r + ".d[k] = " + name(inst.operands[1]) + ".d[0];");
  loops(is, [&](const std::vector<std::string>& iv) {
    std::string cond, dst;
    for (size_t j = 0; j < is.size(); ++j) {
      std::string p = fresh("q");
      line("const long " + p + " = " + std::to_string(lo[j]) + "L + " + iv[j] + " * " +
           std::to_string(interior[j] + 1) + "L;");
      cond += (cond.empty() ? "" : " && ") + p + " >= 0 && " + p + " < " + std::to_string(os[j]) + "L";
      dst += p + " * " + std::to_string(ost[j]) + "L + ";
    }
    line("if (" + (cond.empty() ? std::string("true") : cond) + ") " + r + ".d[" + dst + "0L] = " +
         name(inst.operands[0]) + ".d[" + flat(is, iv) + "];");
  });
}

void Emitter::emit_dot(const Instruction& inst) {
  const Shape& ls = type(inst.operands[0]).shape;
  const Shape& rs = type(inst.operands[1]).shape;
  std::vector<int64_t> lb, rb, lc, rc;
  if (inst.op == Opcode::dot) {
    if (ls.size() > 2 || rs.size() > 2 || ls.empty() || rs.empty()) unsupported(inst, "dot of these ranks");
    lc = {static_cast<int64_t>(ls.size()) - 1};
    rc = {0};
  } else {
    lb = inst.attr_ints("dot_dimension_numbers.lhs_batching_dimensions", {});
    rb = inst.attr_ints("dot_dimension_numbers.rhs_batching_dimensions", {});
    lc = inst.attr_ints("dot_dimension_numbers.lhs_contracting_dimensions", {});
    rc = inst.attr_ints("dot_dimension_numbers.rhs_contracting_dimensions", {});
  }
  auto free_dims = [](size_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < static_cast<int64_t>(rank); ++d)
      if (!std::count(a.begin(), a.end(), d) && !std::count(b.begin(), b.end(), d)) f.push_back(d);
    return f;
  };
  auto lf = free_dims(ls.size(), lb, lc), rf = free_dims(rs.size(), rb, rc);
  const Shape& os = type(inst.results[0]).shape;
  if (os.size() != lb.size() + lf.size() + rf.size()) unsupported(inst, "result rank");
  Shape cs;
  for (int64_t d : lc) cs.push_back(ls.at(d));
  int64_t k_total = 1;
  for (int64_t c : cs) k_total *= c;
  work_ += std::max<int64_t>(count(inst.results[0]), 1) * k_total;
  auto lst = strides_of(ls), rst = strides_of(rs);
  const std::string T = elem(inst.results[0]);
  std::string r = decl(inst.results[0]);
  loops(os, [&](const std::vector<std::string>& iv) {
    std::vector<std::pair<std::string, int64_t>> lt, rt;
    size_t o = 0;
    for (size_t j = 0; j < lb.size(); ++j, ++o) {
      lt.push_back({iv[o], lst[lb[j]]});
      rt.push_back({iv[o], rst[rb[j]]});
    }
    for (int64_t d : lf) lt.push_back({iv[o++], lst[d]});
    for (int64_t d : rf) rt.push_back({iv[o++], rst[d]});
    std::string acc = fresh("acc");
    line(T + " " + acc + " = " + T + "(0);");
    loops(cs, [&](const std::vector<std::string>& kv) {
      auto l2 = lt, r2 = rt;
      for (size_t j = 0; j < lc.size(); ++j) {
        l2.push_back({kv[j], lst[lc[j]]});
        r2.push_back({kv[j], rst[rc[j]]});
      }
      line(acc + " = h_dot_step<" + T + ">(" + acc + ", cv<" + T + ", " + elem(inst.operands[0]) + ">(" +
           name(inst.operands[0]) + ".d[" + affine(0, l2) + "]), cv<" + T + ", " + elem(inst.operands[1]) +
           ">(" + name(inst.operands[1]) + ".d[" + affine(0, r2) + "]));");
    });
    line(r + ".d[" + flat(os, iv) + "] = " + acc + ";");
  });
}

void Emitter::emit_reduce(const Instruction& inst) {
  size_t n = inst.results.size();
  if (inst.operands.size() != 2 * n) unsupported(inst, "operand count");
  const Shape& is = type(inst.operands[0]).shape;
  auto dims = inst.attr_ints("dimensions");
  const Shape& os = type(inst.results[0]).shape;
  auto ost = strides_of(os);
  work_ += count(inst.operands[0]);
  std::vector<std::string> res;
  for (size_t j = 0; j < n; ++j) {
    res.push_back(decl(inst.results[j]));
    line(each(inst.results[j]) + res[j] + ".d[k] = " +
         name(inst.operands[n + j]) + ".d[0];");
  }
  loops(is, [&](const std::vector<std::string>& iv) {
    std::vector<std::pair<std::string, int64_t>> t;
    size_t o = 0;
    for (size_t d = 0; d < is.size(); ++d)
      if (!std::count(dims.begin(), dims.end(), static_cast<int64_t>(d))) t.push_back({iv[d], ost[o++]});
    std::string oi = fresh("o");
    line("const long " + oi + " = " + affine(0, t) + ";");
    std::string ii = flat(is, iv);
    std::vector<std::string> xs;
    for (size_t j = 0; j < n; ++j) xs.push_back(name(inst.operands[j]) + ".d[" + ii + "]");
    line("{");
    ++indent_;
    combine_into(inst.regions.at(0), res, oi, xs);
    --indent_;
    line("}");
  });
}

// Emits `const long <names>[d]` for every operand dim d: the start index
// (0 where no index names d) from the index tensor at batch coordinates
// `bv` (one per index dim but index_vector_dim, in order).
std::vector<std::string> Emitter::start_indices(const IndexSpec& s, size_t operand_rank,
                                                const std::vector<std::string>& bv) {
  const Shape& xs = type(s.indices).shape;
  auto xst = strides_of(xs);
  std::vector<std::string> start(operand_rank, "0L");
  // Index tensor coordinate of each of its dims but the vector dim.
  std::vector<std::string> coord(xs.size(), "");
  size_t b = 0;
  for (size_t d = 0; d < xs.size(); ++d)
    if (static_cast<int64_t>(d) != s.index_vector_dim) coord[d] = bv.at(b++);
  for (size_t k = 0; k < s.start_index_map.size(); ++k) {
    std::vector<std::pair<std::string, int64_t>> t;
    int64_t base = 0;
    for (size_t d = 0; d < xs.size(); ++d) {
      if (static_cast<int64_t>(d) == s.index_vector_dim) base += static_cast<int64_t>(k) * xst[d];
      else t.push_back({coord[d], xst[d]});
    }
    std::string nm = fresh("ix");
    line("const long " + nm + " = idx(" + name(s.indices) + ".d[" + affine(base, t) + "]);");
    start.at(s.start_index_map[k]) = nm;
  }
  for (size_t j = 0; j < s.operand_batching.size(); ++j) {
    int64_t xd = s.indices_batching[j];
    // The batch coordinate of index dim xd.
    start.at(s.operand_batching[j]) = coord.at(xd);
  }
  return start;
}

void Emitter::emit_gather(const Instruction& inst) {
  const std::string k = "dimension_numbers.";
  IndexSpec s{inst.operands[1], inst.attr_int(k + "index_vector_dim"), inst.attr_ints(k + "start_index_map", {}),
              inst.attr_ints(k + "operand_batching_dims", {}), inst.attr_ints(k + "start_indices_batching_dims", {})};
  auto offset_dims = inst.attr_ints(k + "offset_dims", {});
  auto collapsed = inst.attr_ints(k + "collapsed_slice_dims", {});
  auto sizes = inst.attr_ints("slice_sizes");
  const Shape& is = type(inst.operands[0]).shape;
  const Shape& os = type(inst.results[0]).shape;
  auto ist = strides_of(is);
  // Operand dims that take an offset coordinate, in order.
  std::vector<int64_t> window;
  for (int64_t d = 0; d < static_cast<int64_t>(is.size()); ++d)
    if (!std::count(collapsed.begin(), collapsed.end(), d) &&
        !std::count(s.operand_batching.begin(), s.operand_batching.end(), d))
      window.push_back(d);
  if (window.size() != offset_dims.size()) unsupported(inst, "offset_dims");
  std::string r = decl(inst.results[0]);
  loops(os, [&](const std::vector<std::string>& iv) {
    std::vector<std::string> bv, ov;
    for (size_t d = 0; d < os.size(); ++d) {
      if (std::count(offset_dims.begin(), offset_dims.end(), static_cast<int64_t>(d))) ov.push_back(iv[d]);
      else bv.push_back(iv[d]);
    }
    auto start = start_indices(s, is.size(), bv);
    std::string src;
    size_t w = 0;
    for (size_t d = 0; d < is.size(); ++d) {
      bool batching = std::count(s.operand_batching.begin(), s.operand_batching.end(), static_cast<int64_t>(d));
      std::string c = batching ? start[d]
                               : "clampi(" + start[d] + ", 0L, " + std::to_string(is[d] - sizes[d]) + "L)";
      if (w < window.size() && window[w] == static_cast<int64_t>(d)) c = "(" + c + " + " + ov[w++] + ")";
      src += c + " * " + std::to_string(ist[d]) + "L + ";
    }
    line(r + ".d[" + flat(os, iv) + "] = " + name(inst.operands[0]) + ".d[" + src + "0L];");
  });
}

void Emitter::emit_scatter(const Instruction& inst, const std::vector<bool>& consume) {
  size_t n = inst.results.size();
  if (inst.operands.size() != 2 * n + 1) unsupported(inst, "operand count");
  const std::string k = "scatter_dimension_numbers.";
  IndexSpec s{inst.operands[n], inst.attr_int(k + "index_vector_dim"),
              inst.attr_ints(k + "scattered_dims_to_operand_dims", {}), inst.attr_ints(k + "input_batching_dims", {}),
              inst.attr_ints(k + "scatter_indices_batching_dims", {})};
  auto window_dims = inst.attr_ints(k + "update_window_dims", {});
  auto inserted = inst.attr_ints(k + "inserted_window_dims", {});
  const Shape& is = type(inst.operands[0]).shape;
  const Shape& us = type(inst.operands[n + 1]).shape;
  auto ist = strides_of(is);
  std::vector<int64_t> window;  // operand dims with a window coordinate
  for (int64_t d = 0; d < static_cast<int64_t>(is.size()); ++d)
    if (!std::count(inserted.begin(), inserted.end(), d) &&
        !std::count(s.operand_batching.begin(), s.operand_batching.end(), d))
      window.push_back(d);
  if (window.size() != window_dims.size()) unsupported(inst, "update_window_dims");
  std::vector<std::string> res;
  for (size_t j = 0; j < n; ++j) res.push_back(take_or_copy(inst.results[j], inst.operands[j], consume[j]));
  work_ += count(inst.operands[n + 1]);
  loops(us, [&](const std::vector<std::string>& iv) {
    std::vector<std::string> bv, wv;
    for (size_t d = 0; d < us.size(); ++d) {
      if (std::count(window_dims.begin(), window_dims.end(), static_cast<int64_t>(d))) wv.push_back(iv[d]);
      else bv.push_back(iv[d]);
    }
    auto start = start_indices(s, is.size(), bv);
    // XLA drops a window that does not fit entirely.
    std::string fits, dst;
    size_t w = 0;
    for (size_t d = 0; d < is.size(); ++d) {
      bool batching = std::count(s.operand_batching.begin(), s.operand_batching.end(), static_cast<int64_t>(d));
      int64_t wsize = 1;
      std::string c = start[d];
      if (w < window.size() && window[w] == static_cast<int64_t>(d)) {
        wsize = us.at(window_dims[w]);
        c = "(" + c + " + " + wv[w] + ")";
        ++w;
      }
      if (!batching)
        fits += (fits.empty() ? "" : " && ") + start[d] + " >= 0 && " + start[d] + " <= " +
                std::to_string(is[d] - wsize) + "L";
      dst += c + " * " + std::to_string(ist[d]) + "L + ";
    }
    line("if (" + (fits.empty() ? std::string("true") : fits) + ") {");
    ++indent_;
    std::string di = fresh("di");
    line("const long " + di + " = " + dst + "0L;");
    std::vector<std::string> ups;
    for (size_t j = 0; j < n; ++j) ups.push_back(name(inst.operands[n + 1 + j]) + ".d[" + flat(us, iv) + "]");
    combine_into(inst.regions.at(0), res, di, ups);
    --indent_;
    line("}");
  });
}

void Emitter::emit_sort(const Instruction& inst) {
  size_t n = inst.results.size();
  const Shape& s = type(inst.operands[0]).shape;
  int64_t dim = inst.attr_int("dimension", -1);
  if (dim < 0) dim += static_cast<int64_t>(s.size());
  if (dim < 0 || dim >= static_cast<int64_t>(s.size())) unsupported(inst, "dimension");
  int64_t len = s[dim];
  auto st = strides_of(s);
  Shape outer = s;
  outer[dim] = 1;
  work_ += count(inst.operands[0]) * 8;
  std::vector<std::string> res;
  for (size_t j = 0; j < n; ++j) res.push_back(decl(inst.results[j]));
  std::string perm = fresh("perm"), tmp = fresh("ptmp");
  // On the heap: MLX's CPU stream thread has a small stack on macOS.
  line("B<long, " + std::to_string(len) + "> " + perm + ", " + tmp + ";");
  loops(outer, [&](const std::vector<std::string>& iv) {
    std::string base = fresh("b");
    line("const long " + base + " = " + flat(s, iv) + ";");
    line("for (long k = 0; k < " + std::to_string(len) + "L; ++k) " + perm + ".d[k] = k;");
    line("msort(" + perm + ".d, " + tmp + ".d, " + std::to_string(len) + "L, [&](long a, long b) -> bool {");
    ++indent_;
    std::vector<std::string> args;
    for (size_t j = 0; j < n; ++j) {
      args.push_back(name(inst.operands[j]) + ".d[" + base + " + a * " + std::to_string(st[dim]) + "L]");
      args.push_back(name(inst.operands[j]) + ".d[" + base + " + b * " + std::to_string(st[dim]) + "L]");
    }
    auto rets = emit_scalar_region(inst.regions.at(0), args);
    line("return " + rets.at(0) + ";");
    --indent_;
    line("});");
    for (size_t j = 0; j < n; ++j)
      line("for (long k = 0; k < " + std::to_string(len) + "L; ++k) " + res[j] + ".d[" + base + " + k * " +
           std::to_string(st[dim]) + "L] = " + name(inst.operands[j]) + ".d[" + base + " + " + perm + ".d[k] * " +
           std::to_string(st[dim]) + "L];");
  });
}

namespace {

// n of an operand [..., n, n], or -1 when it is not a batch of square matrices.
int64_t square_size(const TensorType& t) {
  const size_t r = t.shape.size();
  if (r < 2 || t.shape[r - 1] != t.shape[r - 2]) return -1;
  return t.shape[r - 1];
}

}  // namespace

void Emitter::emit_cholesky(const Instruction& inst) {
  const TensorType& t = type(inst.operands[0]);
  const int64_t n = square_size(t);
  if (n < 0) unsupported(inst, "operand " + t.str() + " is not square");
  if (t.dtype != DType::kF32 && t.dtype != DType::kF64) unsupported(inst, "on " + t.str());
  if (type(inst.results[0]) != t) unsupported(inst, "result type");
  const int64_t batch = n ? count(inst.operands[0]) / (n * n) : 0;
  const bool lower = inst.attr_bool("lower", false);
  work_ += batch * (n * n * n / 3 + n * n);
  const std::string a = name(inst.operands[0]);
  const std::string r = decl(inst.results[0]);
  if (batch == 0 || n == 0) return;
  const std::string T = elem(inst.operands[0]), N = std::to_string(n) + "L";
  uses_linalg_ = true;
  line("{");
  line("  " + T + " scratch[" + std::to_string(lower ? 1 : n * n) + "];");
  line("  for (long b = 0; b < " + std::to_string(batch) + "L; ++b)");
  line("    pjrtx::backend::linalg::cholesky<" + T + ">(" + a + ".d + b * " + N + " * " + N + ", " + r +
       ".d + b * " + N + " * " + N + ", " + N + ", " + (lower ? "true" : "false") + ", scratch);");
  line("}");
}

void Emitter::emit_triangular_solve(const Instruction& inst) {
  const TensorType& ta = type(inst.operands[0]);
  const TensorType& tb = type(inst.operands[1]);
  const int64_t n = square_size(ta);
  if (n < 0) unsupported(inst, "a " + ta.str() + " is not square");
  if (tb.dtype != ta.dtype || (ta.dtype != DType::kF32 && ta.dtype != DType::kF64))
    unsupported(inst, "on " + ta.str() + " and " + tb.str());
  if (type(inst.results[0]) != tb || tb.shape.size() != ta.shape.size()) unsupported(inst, "result type");
  const bool left = inst.attr_bool("left_side", false);
  const bool lower = inst.attr_bool("lower", false);
  const bool unit = inst.attr_bool("unit_diagonal", false);
  const std::string trans = inst.attr_str("transpose_a", "NO_TRANSPOSE");
  if (trans != "NO_TRANSPOSE" && trans != "TRANSPOSE" && trans != "ADJOINT")
    unsupported(inst, "transpose_a " + trans);
  const size_t rank = tb.shape.size();
  const int64_t rows = tb.shape[rank - 2], cols = tb.shape[rank - 1];
  if ((left ? rows : cols) != n) unsupported(inst, "a does not fit b");
  const int64_t other = left ? cols : rows;
  const int64_t batch = n ? count(inst.operands[0]) / (n * n) : 0;
  work_ += batch * n * n * std::max<int64_t>(other, 1);
  const std::string a = name(inst.operands[0]), b = name(inst.operands[1]);
  const std::string r = decl(inst.results[0]);
  if (count(inst.operands[1]) == 0) return;
  const std::string T = elem(inst.operands[1]), N = std::to_string(n) + "L";
  const bool transposed = trans != "NO_TRANSPOSE";
  uses_linalg_ = true;
  line("{");
  line("  __builtin_memcpy(" + r + ".d, " + b + ".d, sizeof(" + T + ") * " + n_of(inst.operands[1]) + ");");
  line("  " + T + " scratch[" + std::to_string(transposed ? n * n : 1) + "];");
  line("  for (long b = 0; b < " + std::to_string(batch) + "L; ++b)");
  line("    pjrtx::backend::linalg::triangular_solve<" + T + ">(" + a + ".d + b * " + N + " * " + N + ", " + r +
       ".d + b * " + std::to_string(n * other) + "L, " + N + ", " + std::to_string(other) + "L, " +
       (left ? "true" : "false") + ", " + (lower ? "true" : "false") + ", " + (unit ? "true" : "false") + ", " +
       (transposed ? "true" : "false") + ", " + (trans == "ADJOINT" ? "true" : "false") + ", scratch);");
  line("}");
}

void Emitter::emit_rng_bit_generator(const Instruction& inst) {
  const std::string alg = inst.attr_str("rng_algorithm", "DEFAULT");
  const bool threefry = alg == "THREE_FRY";
  if (!threefry && alg != "PHILOX" && alg != "DEFAULT")  // DEFAULT is Philox on XLA:CPU
    unsupported(inst, "rng_algorithm " + alg);
  const TensorType& st = type(inst.operands[0]);
  if (st.dtype != DType::kU64 || st.shape.size() != 1 || type(inst.results[0]) != st)
    unsupported(inst, "state " + st.str());
  const int64_t len = st.shape[0];
  if (threefry ? len != 2 : len != 2 && len != 3) unsupported(inst, alg + " with state " + st.str());
  const TensorType& out = type(inst.results[1]);
  if (out.dtype == DType::kPred) unsupported(inst, "bits of " + out.str());
  const int bits = compiler::dtype_bits(out.dtype);
  const std::string W = "uint" + std::to_string(bits) + "_t";
  const std::string s = name(inst.operands[0]);
  const std::string ns = decl(inst.results[0]);
  const std::string r = decl(inst.results[1]);
  const int64_t n = count(inst.results[1]);
  if (!threefry) {
    line("rbg_philox<" + W + ">(" + s + ".d, " + ns + ".d, " + std::to_string(len) + "L, " + r + ".d, " +
         std::to_string(n) + "L);");
  } else if (bits == 64) {
    line("rbg_threefry_wide(" + s + ".d, " + ns + ".d, " + r + ".d, " + std::to_string(n) + "L);");
  } else {
    // XLA's split: the first dimension of even size, else the first of the
    // largest (a scalar counts as [1]).
    const Shape shape = out.shape.empty() ? Shape{1} : out.shape;
    size_t split = shape.size();
    for (size_t i = 0; i < shape.size() && split == shape.size(); ++i)
      if (shape[i] % 2 == 0) split = i;
    if (split == shape.size()) {
      split = 0;
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] > shape[split]) split = i;
    }
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < split; ++i) outer *= shape[i];
    for (size_t i = split + 1; i < shape.size(); ++i) inner *= shape[i];
    line("rbg_threefry_narrow<" + W + ">(" + s + ".d, " + ns + ".d, " + r + ".d, " + std::to_string(outer) +
         "L, " + std::to_string(shape[split]) + "L, " + std::to_string(inner) + "L);");
  }
}

}  // namespace pjrtx::backend::loops::emitter
