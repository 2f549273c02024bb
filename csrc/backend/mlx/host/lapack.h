// LAPACK routines as XLA:CPU calls them. jaxlib's CPU kernels take their
// LAPACK from SciPy's function table (scipy.linalg.cython_lapack), so a host
// kernel that calls the very same functions gives XLA:CPU's answer bit for
// bit, conventions included that a decomposition leaves free (the order of a
// Schur form's eigenvalues, the signs of its vectors, how a 2x2 block is
// standardised). The Python layer installs the resolver
// (python/lapack_hook.cc: it imports SciPy's table under the GIL);
// functions() runs it once, at the first compile that asks.
#pragma once

#include <complex>
#include <string>

namespace pjrtx::backend::lapack {

// The calling convention of SciPy's cython_lapack: Fortran's, every
// argument by pointer, no hidden string lengths. `select` is unused with
// sort = 'N'.
template <typename T>
using RealGees = void(char* jobvs, char* sort, void* select, int* n, T* a, int* lda, int* sdim,
                      T* wr, T* wi, T* vs, int* ldvs, T* work, int* lwork, int* bwork, int* info);
template <typename C, typename R>
using ComplexGees = void(char* jobvs, char* sort, void* select, int* n, C* a, int* lda, int* sdim,
                         C* w, C* vs, int* ldvs, C* work, int* lwork, R* rwork, int* bwork,
                         int* info);

struct Functions {
  RealGees<float>* sgees = nullptr;
  RealGees<double>* dgees = nullptr;
  ComplexGees<std::complex<float>, float>* cgees = nullptr;
  ComplexGees<std::complex<double>, double>* zgees = nullptr;
  std::string missing;  // why the table is empty; "" when every routine resolved
};

// Returns the table; must not throw (it reports a failure in `missing`).
using Resolver = Functions (*)();
void set_resolver(Resolver resolver);

// PJRTX_LAPACK=scipy (the default): the resolved table, resolved at the
// first call; with no resolver or when SciPy's table cannot be read, a table
// of nulls whose `missing` says why (callers then use pjrtx's own routines).
// PJRTX_LAPACK=own: always the table of nulls.
const Functions& functions();

}  // namespace pjrtx::backend::lapack
