// Stream-K for fast.cu's tiles (fast_tile.cuh, prepended, multiplies and
// stores a tile): C <- alpha*A*B + beta*C where the last tiles of C, those
// of a partial last wave and `full_waves` whole ones before it, are shared
// out evenly over one wave of resident blocks by k steps, instead of each
// running whole on one block while most SMs idle.
//
// The grouped tiles (block_common.cuh's order) are split at sk_first: the
// tiles before it run one per block, as in fast.cu. The sk_tiles after it
// are `steps` = ceil(k / BK) units of work each, and worker g of `workers`
// takes units [start(g), start(g + 1)) of the sk_tiles * steps, with
// start(g) = floor(g * total / workers). A worker's range may begin inside
// one tile, cover whole tiles, and end inside another: whole tiles go
// straight to C; a partial first piece goes to the worker's partials slot
// 0 and a partial last piece to slot 1 (BM x BN accumulators each, laid out
// thread-major so that the stores and the fix-up's loads coalesce). The
// fix-up kernel then adds each split tile's pieces in worker order and
// stores it with alpha and beta, so the result does not depend on timing.
//
// One launch holds both kinds of blocks (the tiles first, then the
// workers): blocks are dispatched in index order, so workers start on the
// SMs the last whole tiles free.

// First unit of worker g.
__device__ __forceinline__ long long stream_start(int g, long long total, int workers)
{
    return total * g / workers;
}

// The worker whose range holds unit u: the largest g with start(g) <= u.
__device__ __forceinline__ int stream_worker(long long u, long long total, int workers)
{
    return (int)(((u + 1) * workers - 1) / total);
}

// Accumulator (i, j) of thread tid in partials slot `slot`.
__device__ __forceinline__ long long partial_index(int slot, int i, int j, int tid)
{
    return (long long)slot * (BM * BN) + (i * TN + j) * THREADS + tid;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_fast_stream(int m, int n, int k, ELEM alpha, const ELEM* __restrict__ a, long long lda,
                 const ELEM* __restrict__ b, long long ldb, ELEM beta, ELEM* __restrict__ c, long long ldc,
                 int vec_ok, int tiles_m, int tiles_n, int sk_first, int sk_tiles, int workers,
                 ACC* __restrict__ partials)
{
    const int steps = (k + BK - 1) / BK;
    // Units [first, end) of all tiles' units, the whole tiles' first.
    long long first, end;
    int worker = -1;
    if ((int)blockIdx.x < sk_first) {
        first = (long long)blockIdx.x * steps;
        end = first + steps;
    } else {
        worker = blockIdx.x - sk_first;
        const long long total = (long long)sk_tiles * steps, base = (long long)sk_first * steps;
        first = base + stream_start(worker, total, workers);
        end = base + stream_start(worker + 1, total, workers);
    }
    ACC acc[TM][TN];
    for (long long u = first; u < end;) {
        const int tile = (int)(u / steps), s0 = (int)(u % steps);
        const int s1 = (int)min((long long)steps, s0 + (end - u));
        const SimtPlace place = simt_place_at(raster_tile_of(tile, tiles_m, tiles_n));
        const int k0 = s0 * BK;
        fast_tile_product<false>(acc, m, n, min(s1 * BK, k) - k0, a + k0, lda, b + (long long)k0 * ldb, ldb, vec_ok,
                          place);
        if (s0 == 0 && s1 == steps) {
            store_tile(acc, m, n, alpha, beta, c, ldc, place);
        } else {
            const int slot = 2 * worker + (u == first ? 0 : 1);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) partials[partial_index(slot, i, j, place.tid)] = acc[i][j];
        }
        u += s1 - s0;
        // The next piece's first stage rewrites the shared tiles.
        if (u < end) __syncthreads();
    }
}

// The fix-up: one block per stream-K tile. A tile inside one worker's
// range was stored whole; a split one is the sum of its pieces, each in
// slot 0 of the worker whose range starts in it, else in slot 1 (workers
// g0 .. g1, those with a range: with more workers than units some have
// none).
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_fast_stream_fixup(int m, int n, int k, ELEM alpha, ELEM beta, ELEM* __restrict__ c, long long ldc,
                       int tiles_m, int tiles_n, int sk_first, int sk_tiles, int workers,
                       const ACC* __restrict__ partials)
{
    const int steps = (k + BK - 1) / BK;
    const long long total = (long long)sk_tiles * steps;
    const long long unit0 = (long long)blockIdx.x * steps;
    const int g0 = stream_worker(unit0, total, workers);
    const int g1 = stream_worker(unit0 + steps - 1, total, workers);
    if (g0 == g1) return;
    const SimtPlace place = simt_place_at(raster_tile_of(sk_first + blockIdx.x, tiles_m, tiles_n));
    ACC sum[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) sum[i][j] = 0;
    for (int g = g0; g <= g1; ++g) {
        const long long start = stream_start(g, total, workers);
        // A worker with no units (more workers than units) wrote nothing.
        if (start == stream_start(g + 1, total, workers)) continue;
        const int slot = 2 * g + (start >= unit0 ? 0 : 1);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) sum[i][j] += partials[partial_index(slot, i, j, place.tid)];
    }
    store_tile(sum, m, n, alpha, beta, c, ldc, place);
}
