// dst_d <- keep_d*dst_d + sum_s weight[d][s]*src_s for up to GROUP_DESTS
// destinations over up to GROUP_SOURCES sources, all rows x cols: a group
// of Strassen's or Winograd's sums (the sums of A, those of B, or C's
// quadrants from the seven products) in one pass that reads every source
// once, where one combine.cu launch per sum would read shared sources
// again for each. keep_d == 0 never reads dst_d; no destination is
// another's source. Row-major blocks, leading dimensions in elements.
// Built by NVRTC with -DELEM, -DACC (unsigned for integers, so overflow
// wraps) and -DROWS_PER_BLOCK; a block is 32 x ROWS_PER_BLOCK threads,
// one element each, coalesced along rows.
#define GROUP_SOURCES 8
#define GROUP_DESTS 8

// Passed by value (the host's #[repr(C)] twin, cuda::strassen::GroupArgs).
struct Group {
    const ELEM* src[GROUP_SOURCES];
    long long src_ld[GROUP_SOURCES];
    ELEM* dst[GROUP_DESTS];
    long long dst_ld[GROUP_DESTS];
    ELEM keep[GROUP_DESTS];
    ELEM weight[GROUP_DESTS][GROUP_SOURCES];
    int sources;
    int dests;
};

extern "C" __global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
combine_group(int rows, int cols, const Group g)
{
    const int j = blockIdx.x * 32 + threadIdx.x;
    const int i = blockIdx.y * ROWS_PER_BLOCK + threadIdx.y;
    if (i >= rows || j >= cols) return;
    // All loads first, so they are in flight together.
    ACC v[GROUP_SOURCES];
#pragma unroll
    for (int s = 0; s < GROUP_SOURCES; ++s)
        v[s] = s < g.sources ? (ACC)g.src[s][i * g.src_ld[s] + j] : (ACC)0;
#pragma unroll
    for (int d = 0; d < GROUP_DESTS; ++d) {
        if (d >= g.dests) break;
        ELEM* out = g.dst[d] + i * g.dst_ld[d] + j;
        ACC acc = (g.keep[d] == (ELEM)0) ? (ACC)0 : (ACC)g.keep[d] * (ACC)*out;
#pragma unroll
        for (int s = 0; s < GROUP_SOURCES; ++s)
            if (s < g.sources && g.weight[d][s] != (ELEM)0) acc += (ACC)g.weight[d][s] * v[s];
        *out = (ELEM)acc;
    }
}
