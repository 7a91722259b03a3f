// C <- alpha*A*B + beta*C, one block per register-blocked tile of C
// (fast_tile.cuh, prepended, multiplies and stores a tile), the tiles in
// block_common.cuh's grouped order.
//
// With split-K (gridDim.z > 1) each z slice covers k_slice columns of A and
// writes its own slice of C, c_slice elements apart; k_slice is a multiple
// of BK, so the slices' rows stay 16-byte aligned. Blocks from grouped index
// tile_limit on return at once (the wave tail, run as a separate product).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_fast(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
          const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c,
          long long ldc, int vec_ok, int k_slice, long long c_slice, int tile_limit)
{
    SKIP_TILES_FROM(tile_limit);
    ENTER_K_SLICE();
    const SimtPlace place = simt_place();
    ACC acc[TM][TN];
    fast_tile_product<true>(acc, m, n, k, a, lda, b, ldb, vec_ok, place);
    store_tile(acc, m, n, alpha, beta, c, ldc, place);
}
