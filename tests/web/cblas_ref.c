/* cblas_dgemm for the browser build of the tests (cblas.h): C = alpha op(A) op(B) + beta C,
 * in double, each element a plain sum over k. */
#include "cblas.h"

#include <stddef.h>

void cblas_dgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                 double alpha, const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc) {
    if (order == CblasColMajor) { /* C^T = op(B)^T op(A)^T: the row-major product with the roles swapped */
        cblas_dgemm(CblasRowMajor, tb, ta, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
        return;
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double x = ta == CblasNoTrans ? a[(size_t)i * lda + p] : a[(size_t)p * lda + i];
                double y = tb == CblasNoTrans ? b[(size_t)p * ldb + j] : b[(size_t)j * ldb + p];
                s += x * y;
            }
            c[(size_t)i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * c[(size_t)i * ldc + j]);
        }
}
