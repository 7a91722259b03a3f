// The Strassen primitive as one GEMM kernel (Huang, Yu and van de Geijn's
// fused form): block z of the grid works on product z of a group, each
//
//     M = (sum_t wa_t A_t)(sum_t wb_t B_t),  then  C_d <- beta C_d + gamma_d alpha M
//
// for each of its destinations d. The operand sums are formed while the
// tiles are staged, so no sum is ever stored in global memory, and the
// epilogue adds the tile into every destination. The products of a group
// have one shape and pairwise disjoint destinations (the host guarantees
// it), so their blocks run concurrently without atomics.
//
// The inner loops are those of fast.cu (a 256-thread block computes a
// BM x BN tile, each thread a TM x TN micro-tile in registers, A staged
// transposed, shared tiles double-buffered); only staging differs. In an
// interior step each thread fetches the first term of each operand as
// fast.cu does (A's vectors into registers, B's with cp.async straight into
// its tile) and copies its vectors of the next STAGED_TERMS terms with
// cp.async into its own slots of a raw staging area, while the current
// step's products run; after them it sums the slots (and vectors of any
// further terms, loaded then) into the first term's. A thread reads back
// only shared memory it wrote itself, so cp.async.wait_all is all the
// synchronisation that needs. Edge steps sum guarded scalar loads, zero
// outside the matrices.
//
// Sums are formed in ACC (unsigned for integers, so they wrap like the
// product). beta == 0 never reads C.
//
// Built by NVRTC with -DELEM, -DACC, -DTM, -DTN and -DRASTER_GROUP, after
// block_common.cuh and simt_tile.cuh. Dynamic shared memory: TILE_BYTES + RAW_BYTES below,
// which the host mirrors (cuda::fused::shared_bytes).
// One block per SM from 256 bytes of accumulators (fast.cu: over 256): the
// f64 8x4 tile with its first term in registers spilled at 128 registers.
#define MIN_BLOCKS (TM * TN * (int)sizeof(ACC) >= 256 ? 1 : 2)
// Terms per operand, after the first, whose interior loads are in flight
// during the products (in staging slots).
#ifndef STAGED_TERMS
#define STAGED_TERMS 2
#endif
// Whether the second term of each operand comes through registers (where
// one block fills an SM; the 128 registers of two-block tiles cannot hold it).
#ifndef SECOND_IN_REGISTERS
#define SECOND_IN_REGISTERS (MIN_BLOCKS == 1)
#endif
#define REGISTER_TERMS (SECOND_IN_REGISTERS ? 2 : 1)
// A launch takes at most GROUP_PRODUCTS products and GROUP_TERMS terms
// (A, B and C together); the host splits larger groups.
#define GROUP_PRODUCTS 8
#define GROUP_TERMS 96
static_assert(TM % VEC == 0 && TN % VEC == 0 && A_VECS >= 1 && B_VECS >= 1 && A_VECS * VEC * THREADS == BM * BK &&
                  B_VECS * VEC * THREADS == BN * BK,
              "TM x TN must give every thread whole 16-byte vectors of both tiles");

// The group, passed by value. Product z's A terms are entries
// first[z][0] .. first[z][0] + count[z][0] - 1 of ptr/weight, its B terms
// first[z][1].., its destinations first[z][2]...
struct FusedGroup {
    unsigned long long ptr[GROUP_TERMS];
    ELEM weight[GROUP_TERMS];
    int first[GROUP_PRODUCTS][3];
    int count[GROUP_PRODUCTS][3];
};

// Kernel parameters read in place by index (sm_70+), not copied to the stack.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define GRID_CONSTANT __grid_constant__
#else
#define GRID_CONSTANT
#endif

// Bytes of dynamic shared memory: the double-buffered tiles, then the raw
// staging slots (STAGED_TERMS x (A_VECS + B_VECS) vectors per thread).
#define TILE_BYTES (2 * BK * (BM + BN) * (int)sizeof(ELEM))
#define RAW_BYTES (STAGED_TERMS * (A_VECS + B_VECS) * THREADS * 16)

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_fused(int m, int n, int k, ELEM alpha, long long lda, long long ldb, ELEM beta, long long ldc,
           const GRID_CONSTANT FusedGroup group, int vec_ok)
{
    extern __shared__ __align__(16) unsigned char shared[];
    ELEM(*a_tile)[BK][BM] = reinterpret_cast<ELEM(*)[BK][BM]>(shared);
    ELEM(*b_tile)[BK][BN] = reinterpret_cast<ELEM(*)[BK][BN]>(shared + 2 * BK * BM * sizeof(ELEM));
    uint4* raw = reinterpret_cast<uint4*>(shared + TILE_BYTES);

    // This product's term ranges, read from the parameters where used
    // rather than held in registers (the f64 8x4 tile spilled otherwise).
    auto first = [&](int operand) { return group.first[blockIdx.z][operand]; };
    auto count = [&](int operand) { return group.count[blockIdx.z][operand]; };
    // Terms below this come through the first term's path or the slots.
    auto staged = [&](int operand) { return min(count(operand), REGISTER_TERMS + STAGED_TERMS); };
    const SimtPlace place = simt_place();
    const int tid = place.tid, row0 = place.row0, col0 = place.col0, ty = place.ty, tx = place.tx;
    const SimtVectors vectors = simt_vectors(tid);
    const int a_row = vectors.a_row, a_p = vectors.a_p, b_p = vectors.b_p, b_col = vectors.b_col;
    const int a_row_step = A_ROW_STEP, b_row_step = B_ROW_STEP;
    const bool rows_inside = vec_ok && row0 + BM <= m && col0 + BN <= n;
    // This thread's first vector of each tile, as an offset from a term's
    // origin (every term of an operand has the same leading dimension).
    const long long a_offset = (long long)(row0 + a_row) * lda + a_p;
    const long long b_offset = (long long)b_p * ldb + col0 + b_col;
    auto term = [&](int index) { return reinterpret_cast<const ELEM*>(group.ptr[index]); };
    // This thread's vector i of B's tile in buffer `target`.
    auto b_vec = [&](int target, int i) {
        return reinterpret_cast<uint4*>(&b_tile[target][b_p + i * b_row_step][b_col]);
    };
    // Slot of vector i of staged term t (A's vectors first, then B's).
    auto slot = [&](int t, int i) { return &raw[(t * (A_VECS + B_VECS) + i) * THREADS + tid]; };

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;

    // The first term of each operand takes fast.cu's path: A's vectors
    // into registers (fetched before the step's products, stored
    // transposed after them), B's straight into its tile with cp.async, so
    // a product of single blocks runs as cuda-fast does. Further terms are
    // copied into this thread's staging slots (the first STAGED_TERMS) or
    // loaded at staging time, and summed in after the products.
    Vec16 first_a[A_VECS];
    // The second term's vectors, fetched into registers too (where
    // SECOND_IN_REGISTERS): staging them through shared memory cost
    // a quarter of the kernel's speed.
    Vec16 second_a[A_VECS], second_b[B_VECS];
    bool pending = false;
    auto fetch = [&](int p0, int target) {
        pending = rows_inside && p0 + BK <= k;
        if (pending) {
            const ELEM* a0 = term(first(0)) + a_offset + p0;
#pragma unroll
            for (int i = 0; i < A_VECS; ++i) first_a[i].raw = __ldg(reinterpret_cast<const uint4*>(a0 + i * a_row_step * lda));
            const ELEM* b0 = term(first(1)) + b_offset + (long long)p0 * ldb;
#pragma unroll
            for (int i = 0; i < B_VECS; ++i) copy_async16(b_vec(target, i), b0 + i * b_row_step * ldb);
            if (SECOND_IN_REGISTERS && count(0) > 1) {
                const ELEM* a1 = term(first(0) + 1) + a_offset + p0;
#pragma unroll
                for (int i = 0; i < A_VECS; ++i)
                    second_a[i].raw = __ldg(reinterpret_cast<const uint4*>(a1 + i * a_row_step * lda));
            }
            if (SECOND_IN_REGISTERS && count(1) > 1) {
                const ELEM* b1 = term(first(1) + 1) + b_offset + (long long)p0 * ldb;
#pragma unroll
                for (int i = 0; i < B_VECS; ++i)
                    second_b[i].raw = __ldg(reinterpret_cast<const uint4*>(b1 + i * b_row_step * ldb));
            }
            for (int t = REGISTER_TERMS; t < staged(0); ++t) {
                const ELEM* base = term(first(0) + t) + a_offset + p0;
#pragma unroll
                for (int i = 0; i < A_VECS; ++i) copy_async16(slot(t - REGISTER_TERMS, i), base + i * a_row_step * lda);
            }
            for (int t = REGISTER_TERMS; t < staged(1); ++t) {
                const ELEM* base = term(first(1) + t) + b_offset + (long long)p0 * ldb;
#pragma unroll
                for (int i = 0; i < B_VECS; ++i) copy_async16(slot(t - REGISTER_TERMS, A_VECS + i), base + i * b_row_step * ldb);
            }
        } else {
#pragma unroll
            for (int i = 0; i < A_VECS; ++i)
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                    const int gi = row0 + a_row + i * a_row_step, gp = p0 + a_p + v;
                    ACC sum = 0;
                    if (gi < m && gp < k)
                        for (int t = 0; t < count(0); ++t)
                            sum += (ACC)group.weight[first(0) + t] * (ACC)term(first(0) + t)[gi * lda + gp];
                    a_tile[target][a_p + v][a_row + i * a_row_step] = (ELEM)sum;
                }
#pragma unroll
            for (int i = 0; i < B_VECS; ++i)
#pragma unroll
                for (int v = 0; v < VEC; ++v) {
                    const int hp = p0 + b_p + i * b_row_step, gj = col0 + b_col + v;
                    ACC sum = 0;
                    if (hp < k && gj < n)
                        for (int t = 0; t < count(1); ++t)
                            sum += (ACC)group.weight[first(1) + t] * (ACC)term(first(1) + t)[hp * ldb + gj];
                    b_tile[target][b_p + i * b_row_step][b_col + v] = (ELEM)sum;
                }
        }
    };
    // Adds w * x into sum, lane by lane.
    auto add = [&](ACC* sum, ACC w, const Vec16& x) {
#pragma unroll
        for (int v = 0; v < VEC; ++v) sum[v] += w * (ACC)x.e[v];
    };
    // Sums step p0's vectors (the first term's, staged or loaded now) into
    // buffer `target`.
    auto stage = [&](int p0, int target) {
        if (!pending) return;
        wait_async_copies();
#pragma unroll
        for (int i = 0; i < A_VECS; ++i) {
            ACC sum[VEC];
            const ACC w0 = (ACC)group.weight[first(0)];
#pragma unroll
            for (int v = 0; v < VEC; ++v) sum[v] = w0 * (ACC)first_a[i].e[v];
            if (SECOND_IN_REGISTERS && count(0) > 1) add(sum, (ACC)group.weight[first(0) + 1], second_a[i]);
            for (int t = REGISTER_TERMS; t < count(0); ++t) {
                Vec16 x;
                if (t < staged(0))
                    x.raw = *slot(t - REGISTER_TERMS, i);
                else
                    x.raw = *reinterpret_cast<const uint4*>(term(first(0) + t) + a_offset + p0 +
                                                            i * a_row_step * lda);
                add(sum, (ACC)group.weight[first(0) + t], x);
            }
#pragma unroll
            for (int v = 0; v < VEC; ++v) a_tile[target][a_p + v][a_row + i * a_row_step] = (ELEM)sum[v];
        }
        // B's first term is in the tile already: only a weight other than
        // one or further terms rewrite it.
        if (count(1) == 1 && group.weight[first(1)] == (ELEM)1) return;
#pragma unroll
        for (int i = 0; i < B_VECS; ++i) {
            Vec16 x;
            x.raw = *b_vec(target, i);
            ACC sum[VEC];
            const ACC w0 = (ACC)group.weight[first(1)];
#pragma unroll
            for (int v = 0; v < VEC; ++v) sum[v] = w0 * (ACC)x.e[v];
            if (SECOND_IN_REGISTERS && count(1) > 1) add(sum, (ACC)group.weight[first(1) + 1], second_b[i]);
            for (int t = REGISTER_TERMS; t < count(1); ++t) {
                if (t < staged(1))
                    x.raw = *slot(t - REGISTER_TERMS, A_VECS + i);
                else
                    x.raw = *reinterpret_cast<const uint4*>(term(first(1) + t) + b_offset + (long long)p0 * ldb +
                                                            i * b_row_step * ldb);
                add(sum, (ACC)group.weight[first(1) + t], x);
            }
#pragma unroll
            for (int v = 0; v < VEC; ++v) x.e[v] = (ELEM)sum[v];
            *b_vec(target, i) = x.raw;
        }
    };

    k_loop<false>(acc, a_tile, b_tile, k, ty, tx, fetch, stage);
    // Destinations innermost: with them outermost the compiler keeps every
    // element's address live across that loop and spills.
    for_each_inside(row0, col0, m, n, ty, tx, [&](int i, int j, int gi, int gj) {
        const long long at = gi * ldc + gj;
        for (int d = 0; d < count(2); ++d) {
            ELEM* c = reinterpret_cast<ELEM*>(group.ptr[first(2) + d]) + at;
            ACC result = (ACC)group.weight[first(2) + d] * (ACC)alpha * acc[i][j];
            if (beta != (ELEM)0) result += (ACC)beta * (ACC)*c;
            *c = (ELEM)result;
        }
    });
}
