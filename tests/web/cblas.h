/* The one BLAS routine the tests' fp64 references call (cblas_dgemm), for the browser build,
 * where OpenBLAS is not available: cblas_ref.c, a plain triple loop in double. */
#ifndef WGML_TESTS_WEB_CBLAS_H
#define WGML_TESTS_WEB_CBLAS_H
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc);
#endif
