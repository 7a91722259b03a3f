// f64 SIMT GEMM designs against cuBLAS dgemm, standalone (issue 6): which
// block shape and synchronisation get the DFMA pipe closest to its ceiling
// before any of them goes into kernels/. Aligned shapes only (m, n, k
// multiples of the tiles), row-major, C = A * B.
//
// Two kernels over one geometry: TY x TX threads, each an 8 x 8 (or TM x TN)
// micro-tile in groups of two consecutive rows (columns), A's staged tile
// stored by rows (BK doubles plus one 16-byte vector of padding), B's by k
// rows; STAGES shared buffers filled with 16-byte cp.async.
//  - ring: one __syncthreads per k step (CUTLASS's sm80 multistage order).
//  - mbar: no block barrier; a "full" mbarrier per buffer completes when
//    every thread's copies into it have landed (cp.async.mbarrier.arrive),
//    an "empty" one when every thread has read it, and a thread refills the
//    buffer it read one step ago, so warps may drift a step apart.
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90 -lcublas dgemm_simt_probe.cu -o probe && ./probe
// Registers without a GPU: nvcc -DKERNEL_ONLY -arch=sm_90 -ptx, then ptxas -v.
#ifndef KERNEL_ONLY
#include "probe_check.h"
#include <algorithm>
#include <vector>
#endif
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned shared_addr(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_addr(dst)), "l"(src));
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(count) : "memory");
}

// The barrier's current phase completes once this thread's earlier
// cp.async copies have landed (counts as one arrival).
__device__ __forceinline__ void mbar_arrive_copies(unsigned long long* bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_addr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned long long* bar)
{
    asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(shared_addr(bar))
                 : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity)
{
    asm volatile(
        "{\n .reg .pred done;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra "
        "WAIT_%=;\n}\n" ::"r"(shared_addr(bar)),
        "r"(parity)
        : "memory");
}

// WARPS_TILED: a warp's 32 threads form a 4 x 8 patch of the thread grid
// (else two rows of 16), so a warp's 16-byte reads of B cover 128 bytes
// (one wavefront) instead of 256.
// A_T: A's staged tile transposed (BK rows of BM doubles plus one vector),
// copied element by element, so that one 16-byte read brings two rows of
// one k and a k step needs half the fragment registers.
template <int TM_, int TN_, int TY_, int TX_, int BK_, int STAGES_, bool WARPS_TILED_ = false, bool A_T_ = false>
struct Geometry {
    static constexpr int TM = TM_, TN = TN_, TY = TY_, TX = TX_, BK = BK_, STAGES = STAGES_;
    static constexpr bool WARPS_TILED = WARPS_TILED_, A_T = A_T_;
    static constexpr int THREADS = TY * TX, BM = TY * TM, BN = TX * TN, VEC = 2;
    static constexpr int ALD = A_T ? BM + VEC : BK + VEC;
    static constexpr int A_STAGE = A_T ? BK * ALD : BM * ALD, B_STAGE = BK * BN;
    static constexpr int A_VECS = BM * BK / VEC / THREADS, B_VECS = BK * BN / VEC / THREADS;
    static_assert(A_VECS * VEC * THREADS == BM * BK && B_VECS * VEC * THREADS == BK * BN, "whole vectors");
    static constexpr size_t SHARED = (size_t)STAGES * (A_STAGE + B_STAGE) * sizeof(double);
};

template <typename G>
struct Tile {
    int row0, col0, ty, tx, tid;
};

template <typename G>
__device__ __forceinline__ Tile<G> place()
{
    const int tiles_m = gridDim.y, tiles_n = gridDim.x, id = blockIdx.y * gridDim.x + blockIdx.x;
    constexpr int GROUP = 8;
    const int per_group = GROUP * tiles_n, first_row = id / per_group * GROUP;
    const int rows = min(tiles_m - first_row, GROUP), in_group = id % per_group;
    Tile<G> t;
    t.row0 = (first_row + in_group % rows) * G::BM;
    t.col0 = (in_group / rows) * G::BN;
    t.tid = threadIdx.x;
    if (G::WARPS_TILED) {
        const int warp = t.tid / 32, lane = t.tid % 32;
        t.ty = (warp / (G::TX / 8)) * 4 + lane / 8;
        t.tx = (warp % (G::TX / 8)) * 8 + lane % 8;
    } else {
        t.ty = t.tid / G::TX;
        t.tx = t.tid % G::TX;
    }
    return t;
}

// This thread's copies of k step kt into buffer `slot`.
template <typename G>
__device__ __forceinline__ void load_step(double* as, double* bs, const double* a_blk, int lda, const double* b_blk,
                                          int ldb, int kt, int slot, int tid)
{
    const int p0 = kt * G::BK;
    if (G::A_T) {
        // A warp copies 4 rows x 8 k (whole 32-byte sectors of each row).
#pragma unroll
        for (int i = 0; i < G::BM * G::BK / G::THREADS; ++i) {
            const int idx = tid + i * G::THREADS, lane = idx % 32, group = idx / 32;
            const int groups_per_band = G::BK / 8;
            const int row = (group / groups_per_band) * 4 + lane / 8, p = (group % groups_per_band) * 8 + lane % 8;
            const unsigned dst = shared_addr(&as[slot * G::A_STAGE + p * G::ALD + row]);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst),
                         "l"(a_blk + (long long)row * lda + p0 + p));
        }
    } else
#pragma unroll
    for (int i = 0; i < G::A_VECS; ++i) {
        const int idx = tid + i * G::THREADS, row = idx / (G::BK / G::VEC), v = idx % (G::BK / G::VEC);
        cp_async16(&as[slot * G::A_STAGE + row * G::ALD + v * G::VEC], a_blk + (long long)row * lda + p0 + v * G::VEC);
    }
#pragma unroll
    for (int i = 0; i < G::B_VECS; ++i) {
        const int idx = tid + i * G::THREADS, kr = idx / (G::BN / G::VEC), v = idx % (G::BN / G::VEC);
        cp_async16(&bs[slot * G::B_STAGE + kr * G::BN + v * G::VEC], b_blk + (long long)(p0 + kr) * ldb + v * G::VEC);
    }
}

// Step p's fragments of A (transposed tile, G::A_T) and B into registers.
template <typename G>
__device__ __forceinline__ void load_fragments(double (&ra)[G::TM], double (&rb)[G::TN], const double* at,
                                               const double* bt, int p, int ty, int tx)
{
#pragma unroll
    for (int g = 0; g < G::TM / G::VEC; ++g) {
        const double2 t = *reinterpret_cast<const double2*>(&at[p * G::ALD + g * G::TY * G::VEC + ty * G::VEC]);
        ra[2 * g] = t.x;
        ra[2 * g + 1] = t.y;
    }
#pragma unroll
    for (int g = 0; g < G::TN / G::VEC; ++g) {
        const double2 t = *reinterpret_cast<const double2*>(&bt[p * G::BN + g * G::TX * G::VEC + tx * G::VEC]);
        rb[2 * g] = t.x;
        rb[2 * g + 1] = t.y;
    }
}

template <typename G>
__device__ __forceinline__ void step_products(double (&acc)[G::TM][G::TN], const double* at, const double* bt, int ty,
                                              int tx)
{
    if (G::A_T) {
#pragma unroll
        for (int p = 0; p < G::BK; ++p) {
            double ra[G::TM], rb[G::TN];
            load_fragments<G>(ra, rb, at, bt, p, ty, tx);
#pragma unroll
            for (int i = 0; i < G::TM; ++i)
#pragma unroll
                for (int j = 0; j < G::TN; ++j) acc[i][j] = fma(ra[i], rb[j], acc[i][j]);
        }
        return;
    }
#pragma unroll
    for (int p0 = 0; p0 < G::BK; p0 += G::VEC) {
        double2 ra[G::TM];
#pragma unroll
        for (int i = 0; i < G::TM; ++i) {
            const int row = (i / G::VEC) * (G::TY * G::VEC) + ty * G::VEC + i % G::VEC;
            ra[i] = *reinterpret_cast<const double2*>(&at[row * G::ALD + p0]);
        }
#pragma unroll
        for (int v = 0; v < G::VEC; ++v) {
            double rb[G::TN];
#pragma unroll
            for (int g = 0; g < G::TN / G::VEC; ++g) {
                const double2 t =
                    *reinterpret_cast<const double2*>(&bt[(p0 + v) * G::BN + g * G::TX * G::VEC + tx * G::VEC]);
                rb[2 * g] = t.x;
                rb[2 * g + 1] = t.y;
            }
#pragma unroll
            for (int i = 0; i < G::TM; ++i)
#pragma unroll
                for (int j = 0; j < G::TN; ++j) acc[i][j] = fma(v == 0 ? ra[i].x : ra[i].y, rb[j], acc[i][j]);
        }
    }
}

template <typename G>
__device__ __forceinline__ void store(const double (&acc)[G::TM][G::TN], double* c, int ldc, const Tile<G>& t)
{
#pragma unroll
    for (int i = 0; i < G::TM; ++i) {
        const int row = t.row0 + (i / G::VEC) * (G::TY * G::VEC) + t.ty * G::VEC + i % G::VEC;
#pragma unroll
        for (int g = 0; g < G::TN / G::VEC; ++g) {
            const int col = t.col0 + g * G::TX * G::VEC + t.tx * G::VEC;
            *reinterpret_cast<double2*>(&c[(long long)row * ldc + col]) = make_double2(acc[i][2 * g], acc[i][2 * g + 1]);
        }
    }
}

// The shared staging of one block's tile: the ring's A and B buffers in
// dynamic shared memory, this thread's place, the block's first row of A
// and column of B, and the k steps; for the mbarrier kernels also the
// ring's start and its refills.
template <typename G>
struct Staging {
    double* as;
    double* bs;
    Tile<G> t;
    const double* a_blk;
    const double* b_blk;
    int lda, ldb, steps;

    __device__ Staging(double* smem, const double* a, int lda_, const double* b, int ldb_, int k)
        : as(smem), bs(smem + G::STAGES * G::A_STAGE), t(place<G>()), a_blk(a + (long long)t.row0 * lda_),
          b_blk(b + t.col0), lda(lda_), ldb(ldb_), steps(k / G::BK)
    {
    }

    // Every buffer's full and empty barriers initialised for all threads,
    // then steps 0 .. STAGES - 2 issued, each arriving on its full barrier
    // once its copies land.
    __device__ __forceinline__ void start_ring(unsigned long long* full, unsigned long long* empty) const
    {
        if (t.tid < G::STAGES) {
            mbar_init(&full[t.tid], G::THREADS);
            mbar_init(&empty[t.tid], G::THREADS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        __syncthreads();
        for (int s = 0; s < G::STAGES - 1 && s < steps; ++s) {
            load_step<G>(as, bs, a_blk, lda, b_blk, ldb, s, s, t.tid);
            mbar_arrive_copies(&full[s]);
        }
    }

    // After step kt's products from buffer `slot`: refills the buffer of
    // step kt - 1 with step kt + STAGES - 1 once every thread has read it
    // (step 0 refills the never-used last one).
    __device__ __forceinline__ void refill(unsigned long long* full, unsigned long long* empty, int kt,
                                           int slot) const
    {
        const int next = kt + G::STAGES - 1;
        if (next >= steps) return;
        const int target = slot == 0 ? G::STAGES - 1 : slot - 1;
        if (kt > 0) mbar_wait(&empty[target], ((kt - 1) / G::STAGES) & 1);
        load_step<G>(as, bs, a_blk, lda, b_blk, ldb, next, target, t.tid);
        mbar_arrive_copies(&full[target]);
    }
};

template <typename G>
__device__ __forceinline__ void zero(double (&acc)[G::TM][G::TN])
{
#pragma unroll
    for (int i = 0; i < G::TM; ++i)
#pragma unroll
        for (int j = 0; j < G::TN; ++j) acc[i][j] = 0;
}

template <typename G, int MINB>
__global__ void __launch_bounds__(G::THREADS, MINB)
    dgemm_ring(int m, int n, int k, const double* __restrict__ a, int lda, const double* __restrict__ b, int ldb,
               double* __restrict__ c, int ldc)
{
    extern __shared__ __align__(16) double smem[];
    const Staging<G> st(smem, a, lda, b, ldb, k);
    double* const as = st.as;
    double* const bs = st.bs;
    const double *const a_blk = st.a_blk, *const b_blk = st.b_blk;
    const Tile<G>& t = st.t;
    const int steps = st.steps;
    double acc[G::TM][G::TN];
    zero<G>(acc);
#pragma unroll
    for (int s = 0; s < G::STAGES - 1; ++s) {
        if (s < steps) load_step<G>(as, bs, a_blk, lda, b_blk, ldb, s, s, t.tid);
        cp_async_commit();
    }
    int slot = 0, refill = G::STAGES - 1;
    for (int kt = 0; kt < steps; ++kt) {
        cp_async_wait<G::STAGES - 2>();
        __syncthreads();
        if (kt + G::STAGES - 1 < steps) load_step<G>(as, bs, a_blk, lda, b_blk, ldb, kt + G::STAGES - 1, refill, t.tid);
        cp_async_commit();
        step_products<G>(acc, as + slot * G::A_STAGE, bs + slot * G::B_STAGE, t.ty, t.tx);
        slot = slot + 1 == G::STAGES ? 0 : slot + 1;
        refill = refill + 1 == G::STAGES ? 0 : refill + 1;
    }
    store<G>(acc, c, ldc, t);
}

template <typename G, int MINB>
__global__ void __launch_bounds__(G::THREADS, MINB)
    dgemm_mbar(int m, int n, int k, const double* __restrict__ a, int lda, const double* __restrict__ b, int ldb,
               double* __restrict__ c, int ldc)
{
    extern __shared__ __align__(16) double smem[];
    __shared__ unsigned long long full[G::STAGES], empty[G::STAGES];
    const Staging<G> st(smem, a, lda, b, ldb, k);
    const double *const as = st.as, *const bs = st.bs;
    const Tile<G>& t = st.t;
    const int steps = st.steps;
    double acc[G::TM][G::TN];
    zero<G>(acc);
    st.start_ring(full, empty);
    int slot = 0;
    unsigned phase = 0;
    for (int kt = 0; kt < steps; ++kt) {
        mbar_wait(&full[slot], phase);
        step_products<G>(acc, as + slot * G::A_STAGE, bs + slot * G::B_STAGE, t.ty, t.tx);
        mbar_arrive(&empty[slot]);
        // Refill the buffer of step kt - 1 with step kt + STAGES - 1 once
        // every thread has read it (step 0 refills the never-used last one).
        st.refill(full, empty, kt, slot);
        if (++slot == G::STAGES) {
            slot = 0;
            phase ^= 1;
        }
    }
    store<G>(acc, c, ldc, t);
}

// dgemm_mbar with the buffer loop unrolled STAGES times, so that every
// shared address is a constant offset and the phases flip once per trip.
template <typename G, int MINB>
__global__ void __launch_bounds__(G::THREADS, MINB)
    dgemm_mbar_unrolled(int m, int n, int k, const double* __restrict__ a, int lda, const double* __restrict__ b,
                        int ldb, double* __restrict__ c, int ldc)
{
    extern __shared__ __align__(16) double smem[];
    __shared__ unsigned long long full[G::STAGES], empty[G::STAGES];
    const Staging<G> st(smem, a, lda, b, ldb, k);
    const double *const as = st.as, *const bs = st.bs;
    const Tile<G>& t = st.t;
    const int steps = st.steps;
    double acc[G::TM][G::TN];
    zero<G>(acc);
    st.start_ring(full, empty);
    unsigned phase = 0;
    for (int k0 = 0; k0 < steps; k0 += G::STAGES, phase ^= 1) {
#pragma unroll
        for (int s = 0; s < G::STAGES; ++s) {
            const int kt = k0 + s;
            if (kt >= steps) break;
            mbar_wait(&full[s], phase);
            step_products<G>(acc, as + s * G::A_STAGE, bs + s * G::B_STAGE, t.ty, t.tx);
            mbar_arrive(&empty[s]);
            st.refill(full, empty, kt, s);
        }
    }
    store<G>(acc, c, ldc, t);
}

// dgemm_mbar with A transposed (G::A_T) and the fragments software-
// pipelined: the next k's fragments are read while this k's products run,
// across buffer boundaries too (the next buffer's full barrier is waited
// for one k early), so no step starts on a shared-memory read.

template <typename G, int MINB>
__global__ void __launch_bounds__(G::THREADS, MINB)
    dgemm_mbar_pipe(int m, int n, int k, const double* __restrict__ a, int lda, const double* __restrict__ b, int ldb,
                    double* __restrict__ c, int ldc)
{
    static_assert(G::A_T, "per-k fragments need A transposed");
    extern __shared__ __align__(16) double smem[];
    __shared__ unsigned long long full[G::STAGES], empty[G::STAGES];
    const Staging<G> st(smem, a, lda, b, ldb, k);
    const double *const as = st.as, *const bs = st.bs;
    const Tile<G>& t = st.t;
    const int steps = st.steps;
    double acc[G::TM][G::TN];
    zero<G>(acc);
    st.start_ring(full, empty);
    double ra[2][G::TM], rb[2][G::TN];
    mbar_wait(&full[0], 0);
    load_fragments<G>(ra[0], rb[0], as, bs, 0, t.ty, t.tx);
    int slot = 0;
    unsigned phase = 0;
    for (int kt = 0; kt < steps; ++kt) {
        const double* at = as + slot * G::A_STAGE;
        const double* bt = bs + slot * G::B_STAGE;
        const int next_slot = slot + 1 == G::STAGES ? 0 : slot + 1;
        const unsigned next_phase = next_slot == 0 ? phase ^ 1 : phase;
#pragma unroll
        for (int p = 0; p < G::BK; ++p) {
            const int cur = p & 1;
            if (p + 1 < G::BK) {
                load_fragments<G>(ra[cur ^ 1], rb[cur ^ 1], at, bt, p + 1, t.ty, t.tx);
            } else if (kt + 1 < steps) {
                mbar_wait(&full[next_slot], next_phase);
                load_fragments<G>(ra[cur ^ 1], rb[cur ^ 1], as + next_slot * G::A_STAGE, bs + next_slot * G::B_STAGE,
                                  0, t.ty, t.tx);
            }
            if (p + 1 == G::BK) mbar_arrive(&empty[slot]);
#pragma unroll
            for (int i = 0; i < G::TM; ++i)
#pragma unroll
                for (int j = 0; j < G::TN; ++j) acc[i][j] = fma(ra[cur][i], rb[cur][j], acc[i][j]);
        }
        st.refill(full, empty, kt, slot);
        slot = next_slot;
        phase = next_phase;
    }
    store<G>(acc, c, ldc, t);
}

#ifndef KERNEL_ONLY
__global__ void fill_uniform(double* x, size_t count, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long h = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((unsigned long long)seed << 32);
        h ^= h >> 31;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        x[i] = (double)(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
    }
}

struct Problem {
    int m, n, k;
    double *a, *b, *c, *ref;
};

typedef void (*Launch)(const Problem&);

// KIND: 0 ring, 1 mbar, 2 mbar unrolled, 3 mbar with pipelined fragments.
template <typename G, int MINB, int KIND>
void launch(const Problem& p)
{
    void (*kernel)(int, int, int, const double*, int, const double*, int, double*, int);
    if constexpr (KIND == 0) kernel = dgemm_ring<G, MINB>;
    else if constexpr (KIND == 1) kernel = dgemm_mbar<G, MINB>;
    else if constexpr (KIND == 2) kernel = dgemm_mbar_unrolled<G, MINB>;
    else kernel = dgemm_mbar_pipe<G, MINB>;
    static bool configured = false;
    if (!configured) {
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)G::SHARED));
        configured = true;
    }
    dim3 grid(p.n / G::BN, p.m / G::BM);
    kernel<<<grid, G::THREADS, G::SHARED>>>(p.m, p.n, p.k, p.a, p.k, p.b, p.n, p.c, p.n);
    CUDA_CHECK(cudaGetLastError());
}

static cublasHandle_t handle;

void cublas_launch(const Problem& p)
{
    const double one = 1.0, zero = 0.0;
    CUBLAS_CHECK(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &one, p.b, p.n, p.a, p.k, &zero, p.c,
                             p.n));
}

double median_ms(Launch run, const Problem& p, int reps)
{
    run(p);
    run(p);
    return median_event_ms([&] { run(p); }, reps);
}

struct Entry {
    const char* name;
    Launch run;
    int bm, bn, bk;
};

int main(int argc, char** argv)
{
    CUBLAS_CHECK(cublasCreate(&handle));
    const int reps = 10;
    // name: kernel, micro-tile, threads TY x TX, BK, stages, blocks per SM.
    const Entry entries[] = {
        {"mbar 8x8 16x16 bk16 s4 b1", launch<Geometry<8, 8, 16, 16, 16, 4>, 1, 1>, 128, 128, 16},
        {"mbar AT 8x8 16x16 bk16 s4 b1", launch<Geometry<8, 8, 16, 16, 16, 4, false, true>, 1, 1>, 128, 128, 16},
        {"pipe AT 8x8 16x16 bk16 s4 b1", launch<Geometry<8, 8, 16, 16, 16, 4, false, true>, 1, 3>, 128, 128, 16},
        {"pipe AT 8x8 16x16 bk8 s6 b1", launch<Geometry<8, 8, 16, 16, 8, 6, false, true>, 1, 3>, 128, 128, 8},
        {"mbar AT 8x8 16x16 bk32 s3 b1", launch<Geometry<8, 8, 16, 16, 32, 3, false, true>, 1, 1>, 128, 128, 32},
    };
    // Arguments (all optional): first entry, number of entries, one size.
    const size_t count = sizeof(entries) / sizeof(entries[0]);
    const size_t first = argc > 1 ? atoi(argv[1]) : 0;
    const size_t last = argc > 2 ? std::min(count, first + atoi(argv[2])) : count;
    std::vector<int> sizes = {4096, 8192};
    if (argc > 3) sizes = {atoi(argv[3])};
    for (int size : sizes) {
        Problem p{size, size, size};
        const size_t elems = (size_t)size * size;
        CUDA_CHECK(cudaMalloc(&p.a, elems * 8));
        CUDA_CHECK(cudaMalloc(&p.b, elems * 8));
        CUDA_CHECK(cudaMalloc(&p.c, elems * 8));
        CUDA_CHECK(cudaMalloc(&p.ref, elems * 8));
        fill_uniform<<<1024, 256>>>(p.a, elems, 1);
        fill_uniform<<<1024, 256>>>(p.b, elems, 2);
        CUDA_CHECK(cudaGetLastError());
        Problem r = p;
        r.c = p.ref;
        cublas_launch(r);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<double> ref(elems), got(elems);
        CUDA_CHECK(cudaMemcpy(ref.data(), p.ref, elems * 8, cudaMemcpyDeviceToHost));
        const double flops = 2.0 * size * (double)size * size;
        for (size_t e = first; e < last; ++e) {
            const Entry& entry = entries[e];
            CUDA_CHECK(cudaMemset(p.c, 0xff, elems * 8));
            entry.run(p);
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaMemcpy(got.data(), p.c, elems * 8, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (size_t i = 0; i < elems; ++i) {
                const double d = std::abs(got[i] - ref[i]);
                if (!(d <= worst)) worst = d;  // NaN propagates
            }
            const double cublas_ms = median_ms(cublas_launch, r, reps);
            const double ms = median_ms(entry.run, p, reps);
            const double cublas_ms2 = median_ms(cublas_launch, r, reps);
            const double peer = std::min(cublas_ms, cublas_ms2);
            printf("%5d %-28s %8.3f ms %6.2f TFLOPS  cublas %8.3f ms %6.2f TFLOPS  ratio %.3f  max|diff| %.2e\n", size,
                   entry.name, ms, flops / ms / 1e9, peer, flops / peer / 1e9, peer / ms, worst);
            fflush(stdout);
        }
        CUDA_CHECK(cudaFree(p.a));
        CUDA_CHECK(cudaFree(p.b));
        CUDA_CHECK(cudaFree(p.c));
        CUDA_CHECK(cudaFree(p.ref));
    }
    CUBLAS_CHECK(cublasDestroy(handle));
    return 0;
}
#endif
