// C (rows x n INT32, ld ldc) = A (rows x depth INT8) * B^T (n x depth
// INT8), both k-contiguous (cuBLAS's "TN"), + C where `accumulate`: the
// emulated product's INT8 products on Hopper's warpgroup MMA (sm_90a).
// With a modulus m > 0, C is instead an INT8 plane (ld ldc bytes) of the
// sums' residues modulo m, each in [-128, 127]: the CRT needs only a
// residue congruent to the sum, and a byte is a quarter of the INT32's
// traffic to write and to read back.
//
// Hierarchy: a block of 384 threads computes a BM x BN = 128 x 256 tile
// of C. Warpgroup 0 is the producer: one thread issues the tensor memory
// accelerator's copies of A's and B's next BK = 128-byte slices of depth
// into a ring of STAGES shared-memory buffers. Warpgroups 1 and 2 are the
// consumers: each multiplies 64 rows of the tile by all 256 columns with
// wgmma.m64n256k32 (four per slice), its 64 x 256 INT32 accumulators in
// registers (128 per thread).
//
// Hand-offs: each buffer has a "full" mbarrier, whose phase completes when
// the producer's copies have landed (their byte count is announced with
// expect_tx), and an "empty" one, whose phase completes when both
// consumers are done reading it (one arrival each, once the MMAs that read
// it have retired: one group of MMAs stays in flight, so a buffer is
// released one slice after it was multiplied).
//
// Layout in shared memory: each buffer is the copy's box as TMA writes it
// with 128-byte swizzling (rows of 128 bytes, the 16-byte chunks of row r
// XORed with r mod 8, in 1024-byte atoms of 8 rows), which is the layout
// the wgmma descriptors name; a k step of 32 moves the descriptors' start
// by 32 bytes within the atom.
//
// Pairs (CLUSTER = 2): the blocks of a cluster of two take vertically
// adjacent tiles, which need the same slices of B; each block's producer
// copies half of B's box and multicasts it to both blocks, so each block
// reads 32 KiB a slice from L2 instead of 48. A buffer is then overwritten
// in both blocks by either producer, so its "empty" barrier counts the
// consumers of both blocks (each arrives on both), and the pair meets at a
// cluster barrier after initialising its barriers and before exiting.
//
// Edges: the tensor maps' extents are rows x depth and n x depth, so
// copies past them fill zeros (any depth, any rows and n); the epilogue
// stores only elements inside C. Tiles (pairs of tiles) are visited in
// block_common.cuh's grouped order, one block (pair) per grid index.
//
// Built by NVRTC for sm_90a with -DSTAGES, -DCLUSTER and -DRASTER_GROUP.
#define BM 128
#define BN 256
#define BK 128
#define THREADS 384
#define A_BYTES (BM * BK)
#define B_BYTES (BN * BK)
#if CLUSTER == 2
#define KERNEL_CLUSTER __cluster_dims__(2, 1, 1)
#elif CLUSTER == 1
#define KERNEL_CLUSTER
#else
#error "CLUSTER is 1 or 2"
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The driver's opaque CUtensorMap (64-byte aligned, 128 bytes), encoded by
// the host and passed by value as a __grid_constant__ parameter.
struct __align__(64) TensorMap {
    unsigned long long words[16];
};

// At most this many polls of an mbarrier before the kernel traps: a
// missing arrival (a fault) ends the launch with an error instead of
// hanging the stream. try_wait suspends for a while between polls, so this
// is minutes, where a slice takes microseconds.
#define MBAR_POLLS (1u << 26)

__device__ __forceinline__ void mbar_wait_bounded(unsigned bar, unsigned parity)
{
    for (unsigned i = 0; i < MBAR_POLLS; ++i) {
        unsigned done;
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
        if (done) return;
    }
    __trap();
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
                 : "memory");
}

// One arrival on the barrier at the same offset as `bar` in block `rank`
// of the cluster.
__device__ __forceinline__ void mbar_arrive_in(unsigned bar, unsigned rank)
{
    asm volatile("{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
                 " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
                 "r"(rank)
                 : "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// Every thread of the cluster's blocks arrives, then waits for the rest.
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive;\n barrier.cluster.wait;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes)
{
    asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

// The box of `map` at (inner, outer) = (depth offset, row) into shared
// memory at `dst`, completing `bytes` on the mbarrier `bar`.
__device__ __forceinline__ void tma_load(unsigned dst, const TensorMap* map, int inner, int outer, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar)
                 : "memory");
}

// As tma_load, the box written at `dst` and completing on `bar` in every
// block of the cluster that `mask` names.
__device__ __forceinline__ void tma_load_multicast(unsigned dst, const TensorMap* map, int inner, int outer,
                                                   unsigned bar, unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
                 "l"(reinterpret_cast<unsigned long long>(map)), "r"(inner), "r"(outer), "r"(bar), "h"(mask)
                 : "memory");
}

// The wgmma descriptor of a K-major operand at shared address `addr`
// (1024-byte aligned atoms, 128-byte swizzle): start address >> 4, the
// leading offset unused by swizzled K-major layouts (16 bytes), the stride
// between 8-row atoms 1024 bytes, swizzle mode 1 (128 bytes).
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(16 >> 4) << 16) |
           ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}

#define ACC8(i) "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), \
                "+r"(d[i + 5]), "+r"(d[i + 6]), "+r"(d[i + 7])

// d (64 x 256 INT32 of this warpgroup) += A (64 x 32) * B^T (256 x 32).
__device__ __forceinline__ void wgmma_64x256x32(int* d, unsigned long long da, unsigned long long db)
{
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, "
                 "%8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, "
                 "%40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, "
                 "%56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, "
                 "%72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, "
                 "%88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, "
                 "%104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, "
                 "%120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, 1;\n"
                 : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56),
                   ACC8(64), ACC8(72), ACC8(80), ACC8(88), ACC8(96), ACC8(104), ACC8(112), ACC8(120)
                 : "l"(da), "l"(db));
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most N groups of this warpgroup's MMAs are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait(int* d)
{
    // The accumulators are named so that no read of them is moved above
    // the wait.
    asm volatile("wgmma.wait_group.sync.aligned %128;\n"
                 : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56),
                   ACC8(64), ACC8(72), ACC8(80), ACC8(88), ACC8(96), ACC8(104), ACC8(112), ACC8(120)
                 : "n"(N)
                 : "memory");
}

// Stores a consumer's 64 x 256 accumulators d: INT32 sums (added to C
// where `accumulate`), or with a modulus their residue bytes.
__device__ __forceinline__ void epilogue(const int* d, int tid, int group, int row0, int col0, int rows, int n,
                                         int* __restrict__ c, long long ldc, int accumulate, int modulus)
{
    // Accumulator j of a thread: row 16 w + lane / 4 (+ 8 for the odd
    // pairs), columns 8 (j / 4) + 2 (lane % 4) and the next.
    const int lane = tid % 32, warp = (tid % 128) / 32;
    const int r_top = row0 + 64 * (group - 1) + 16 * warp + lane / 4;
    const int c_first = col0 + 2 * (lane % 4);
    if (modulus > 0) {
        signed char* const bytes = reinterpret_cast<signed char*>(c);
#pragma unroll
        for (int q = 0; q < 64; ++q) {
            const int row = r_top + 8 * (q & 1);
            const int col = c_first + 8 * (q >> 1);
            if (row >= rows || col >= n) continue;
            signed char* out = bytes + (long long)row * ldc + col;
            // A remainder in (-m, m), folded into a byte's range.
            int x = d[2 * q] % modulus, y = d[2 * q + 1] % modulus;
            x += x > 127 ? -modulus : (x < -128 ? modulus : 0);
            y += y > 127 ? -modulus : (y < -128 ? modulus : 0);
            if (col + 1 < n) {
                *reinterpret_cast<char2*>(out) = make_char2((signed char)x, (signed char)y);
            } else {
                out[0] = (signed char)x;
            }
        }
        return;
    }
#pragma unroll
    for (int q = 0; q < 64; ++q) {
        const int row = r_top + 8 * (q & 1);
        const int col = c_first + 8 * (q >> 1);
        if (row >= rows || col >= n) continue;
        int* out = c + (long long)row * ldc + col;
        int x = d[2 * q], y = d[2 * q + 1];
        if (col + 1 < n) {
            if (accumulate) {
                const int2 old = *reinterpret_cast<const int2*>(out);
                x += old.x;
                y += old.y;
            }
            *reinterpret_cast<int2*>(out) = make_int2(x, y);
        } else {
            out[0] = accumulate ? x + out[0] : x;
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) KERNEL_CLUSTER
int8_wgmma(const __grid_constant__ TensorMap map_a, const __grid_constant__ TensorMap map_b, int rows, int n,
           int depth, int* __restrict__ c, long long ldc, int accumulate, int modulus)
{
    // The ring, aligned to the swizzle's 1024-byte atoms (the host asks for
    // 1 KiB more than the buffers), then the barriers.
    extern __shared__ unsigned char shared_raw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(shared_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    const unsigned bars = ring + STAGES * (A_BYTES + B_BYTES);
    // full[s] at bars + 8s, empty[s] at bars + 8(STAGES + s).
#define FULL(s) (bars + 8u * (unsigned)(s))
#define EMPTY(s) (bars + 8u * (unsigned)(STAGES + (s)))
#define A_AT(s) (ring + (unsigned)(s) * (A_BYTES + B_BYTES))
#define B_AT(s) (A_AT(s) + A_BYTES)

    const int tid = threadIdx.x;
    const int group = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(FULL(s), 1);
            mbar_init(EMPTY(s), 2 * CLUSTER);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if CLUSTER == 2
    cluster_sync();
    const unsigned rank = cluster_rank();
    const int tiles_n = (n + BN - 1) / BN, pairs_m = ((rows + BM - 1) / BM + 1) / 2;
    const TileCoord pair = raster_tile_of((int)(blockIdx.x / 2), pairs_m, tiles_n);
    const int row0 = (2 * pair.row + (int)rank) * BM, col0 = pair.col * BN;
#else
    __syncthreads();
    const TileCoord tile = raster_tile_of((int)blockIdx.x, (rows + BM - 1) / BM, (n + BN - 1) / BN);
    const int row0 = tile.row * BM, col0 = tile.col * BN;
#endif
    const int slices = (depth + BK - 1) / BK;

    if (group == 0) {
        // The producer: one thread; the rest of its warpgroup has nothing to do.
        if (tid == 0) {
            for (int it = 0; it < slices; ++it) {
                const int s = it % STAGES;
                const unsigned round = (unsigned)(it / STAGES);
                // Round 0 finds every buffer empty (the parity before the first phase).
                mbar_wait_bounded(EMPTY(s), (round & 1u) ^ 1u);
                mbar_expect_bytes(FULL(s), A_BYTES + B_BYTES);
                tma_load(A_AT(s), &map_a, it * BK, row0, FULL(s));
#if CLUSTER == 2
                // This block's half of B's rows, into both blocks.
                tma_load_multicast(B_AT(s) + rank * (B_BYTES / 2), &map_b, it * BK, col0 + (int)rank * (BN / 2),
                                   FULL(s), (unsigned short)3);
#else
                tma_load(B_AT(s), &map_b, it * BK, col0, FULL(s));
#endif
            }
        }
#if CLUSTER == 2
        cluster_sync();
#endif
        return;
    }

    // A consumer: rows 64 (group - 1) .. + 64 of the tile.
    const unsigned a_rows = 64u * BK * (unsigned)(group - 1);
    int d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0;
    for (int it = 0; it < slices; ++it) {
        const int s = it % STAGES;
        mbar_wait_bounded(FULL(s), (unsigned)(it / STAGES) & 1u);
        const unsigned long long da = wgmma_desc(A_AT(s) + a_rows), db = wgmma_desc(B_AT(s));
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk) {
            // 32 bytes on in the atom: 2 in the descriptor's address field.
            wgmma_64x256x32(d, da + 2 * kk, db + 2 * kk);
        }
        wgmma_commit();
        // The previous slice's MMAs have retired: its buffer is free.
        wgmma_wait<1>(d);
        if (it > 0 && tid % 128 == 0) {
#if CLUSTER == 2
            mbar_arrive_in(EMPTY((it - 1) % STAGES), 0);
            mbar_arrive_in(EMPTY((it - 1) % STAGES), 1);
#else
            mbar_arrive(EMPTY((it - 1) % STAGES));
#endif
        }
    }
    wgmma_wait<0>(d);
    epilogue(d, tid, group, row0, col0, rows, n, c, ldc, accumulate, modulus);
#if CLUSTER == 2
    // The peer may still arrive on this block's barriers.
    cluster_sync();
#endif
}

#endif
