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

// syevd / heevd: eigh.
template <typename T>
using RealSyevd = void(char* jobz, char* uplo, int* n, T* a, int* lda, T* w, T* work, int* lwork,
                       int* iwork, int* liwork, int* info);
template <typename C, typename R>
using ComplexHeevd = void(char* jobz, char* uplo, int* n, C* a, int* lda, R* w, C* work,
                          int* lwork, R* rwork, int* lrwork, int* iwork, int* liwork, int* info);
// gesdd: svd.
template <typename T>
using RealGesdd = void(char* jobz, int* m, int* n, T* a, int* lda, T* s, T* u, int* ldu, T* vt,
                       int* ldvt, T* work, int* lwork, int* iwork, int* info);
template <typename C, typename R>
using ComplexGesdd = void(char* jobz, int* m, int* n, C* a, int* lda, R* s, C* u, int* ldu, C* vt,
                          int* ldvt, C* work, int* lwork, R* rwork, int* iwork, int* info);
// geev: eig.
template <typename T>
using RealGeev = void(char* jobvl, char* jobvr, int* n, T* a, int* lda, T* wr, T* wi, T* vl,
                      int* ldvl, T* vr, int* ldvr, T* work, int* lwork, int* info);
template <typename C, typename R>
using ComplexGeev = void(char* jobvl, char* jobvr, int* n, C* a, int* lda, C* w, C* vl, int* ldvl,
                         C* vr, int* ldvr, C* work, int* lwork, R* rwork, int* info);

using cf = std::complex<float>;
using cd = std::complex<double>;

struct Functions {
  RealGees<float>* sgees = nullptr;
  RealGees<double>* dgees = nullptr;
  ComplexGees<cf, float>* cgees = nullptr;
  ComplexGees<cd, double>* zgees = nullptr;
  RealSyevd<float>* ssyevd = nullptr;
  RealSyevd<double>* dsyevd = nullptr;
  ComplexHeevd<cf, float>* cheevd = nullptr;
  ComplexHeevd<cd, double>* zheevd = nullptr;
  RealGesdd<float>* sgesdd = nullptr;
  RealGesdd<double>* dgesdd = nullptr;
  ComplexGesdd<cf, float>* cgesdd = nullptr;
  ComplexGesdd<cd, double>* zgesdd = nullptr;
  RealGeev<float>* sgeev = nullptr;
  RealGeev<double>* dgeev = nullptr;
  ComplexGeev<cf, float>* cgeev = nullptr;
  ComplexGeev<cd, double>* zgeev = nullptr;
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
