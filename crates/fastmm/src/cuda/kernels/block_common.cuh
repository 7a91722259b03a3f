// Prepended to the cuda-fast kernels (fast.cu, fast_mma.cu, fused.cu): what
// every block does before its tile, the same in each.
//
// Block rasterization shared by the cuda-fast kernels: the launch order of
// blocks (x fastest, then y) is regrouped so that consecutive blocks walk
// down a strip of RASTER_GROUP tile rows before moving one tile column to
// the right. The blocks resident at one time then share a few panels of A
// and B in L2 instead of each wave streaming all of B from DRAM.
// RASTER_GROUP comes from the host (tunables::CUDA_RASTER_GROUP), which
// relies on this order to find the wave tail (below).
#ifndef RASTER_GROUP
#error "RASTER_GROUP must be defined by the host"
#endif

struct TileCoord {
    int row;
    int col;
};

// The tile of grouped index `id` in a tiles_m x tiles_n grid of tiles.
__device__ __forceinline__ TileCoord raster_tile_of(int id, int tiles_m, int tiles_n)
{
    const int per_group = RASTER_GROUP * tiles_n;
    const int first_row = (id / per_group) * RASTER_GROUP;
    const int rows = min(tiles_m - first_row, RASTER_GROUP);
    const int in_group = id % per_group;
    TileCoord t;
    t.row = first_row + in_group % rows;
    t.col = in_group / rows;
    return t;
}

// This block's tile: the grid is the tiles of C, launched in plain order.
__device__ __forceinline__ TileCoord raster_tile()
{
    return raster_tile_of(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x);
}

// Wave tail: blocks whose grouped index is tile_limit or more return at
// once. In the grouped order those are the last tile columns of the last
// strip, a rectangle of C, which the host runs as a separate split-K
// product instead of as a nearly empty last wave of whole tiles.
#define SKIP_TILES_FROM(tile_limit)                                            \
    do {                                                                        \
        if ((int)(blockIdx.y * gridDim.x + blockIdx.x) >= (tile_limit)) return; \
    } while (0)

// Split-K: block z multiplies k columns [z·k_slice, …) of A by the same rows
// of B into its own m×n slice of C, c_slice elements on (the host adds the
// slices); k becomes the slice's depth. A macro, as it moves the kernel's
// own __restrict__ parameters.
#define ENTER_K_SLICE()                          \
    do {                                         \
        const int k0 = blockIdx.z * k_slice;     \
        a += k0;                                 \
        b += (long long)k0 * ldb;                \
        c += blockIdx.z * c_slice;               \
        k = min(k_slice, k - k0);                \
    } while (0)

// 16-byte copies from global to shared memory that skip the registers
// (cp.async, sm_80+). Before sm_80 the copy goes through a register, so a
// kernel compiled for either keeps one code path; fast_mma.cu only runs on
// sm_80+.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HAS_CP_ASYNC 1
#else
#define HAS_CP_ASYNC 0
#endif

__device__ __forceinline__ void copy_async16(void* shared_dst, const void* src)
{
#if HAS_CP_ASYNC
    const unsigned dst = (unsigned)__cvta_generic_to_shared(shared_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#else
    *reinterpret_cast<uint4*>(shared_dst) = *reinterpret_cast<const uint4*>(src);
#endif
}

// Waits for all of this thread's copy_async16 copies; they are then visible
// to it (to the block only after a barrier).
__device__ __forceinline__ void wait_async_copies()
{
#if HAS_CP_ASYNC
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// One element (4 or 8 bytes) from global to shared memory, or zero where
// `inside` is false (then `src` is not read). On sm_80+ asynchronous like
// copy_async16 and waited for by wait_async_copies or wait_async_groups.
template <typename T>
__device__ __forceinline__ void copy_async_element(T* shared_dst, const T* src, bool inside)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async copies 4, 8 or 16 bytes");
#if HAS_CP_ASYNC
    const unsigned dst = (unsigned)__cvta_generic_to_shared(shared_dst);
    // Bytes read from src; the rest of the element is zero-filled.
    const int read = inside ? (int)sizeof(T) : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(sizeof(T)), "r"(read));
#else
    *shared_dst = inside ? *src : (T)0;
#endif
}

// Closes the group of this thread's asynchronous copies issued since the
// last commit (an empty group is allowed, and counts).
__device__ __forceinline__ void commit_async_copies()
{
#if HAS_CP_ASYNC
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most PENDING of this thread's committed groups are still
// in flight; the copies of the others are then visible to it (to the block
// only after a barrier).
template <int PENDING>
__device__ __forceinline__ void wait_async_groups()
{
#if HAS_CP_ASYNC
    asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
}

// mbarriers (sm_90+; not defined before, so a kernel that uses them fails
// to build there): a barrier object in shared memory whose phase completes
// after `count` arrivals; waiting names the parity of the phase waited for
// (0 for its first, then alternating).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbarrier_init(unsigned long long* barrier, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"((unsigned)__cvta_generic_to_shared(barrier)),
                 "r"(count)
                 : "memory");
}

// Makes the initialised barriers visible to every thread (before a
// __syncthreads, ahead of their first use).
__device__ __forceinline__ void mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival, once every cp.async this thread issued before has landed
// (the copies are then visible to whoever sees the phase complete).
__device__ __forceinline__ void mbarrier_arrive_after_copies(unsigned long long* barrier)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(barrier))
                 : "memory");
}

// One arrival now.
__device__ __forceinline__ void mbarrier_arrive(unsigned long long* barrier)
{
    asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(barrier))
                 : "memory");
}

// Waits until the phase of parity `parity` has completed. (The label is
// local to the braces, so every inlined copy may reuse it.)
__device__ __forceinline__ void mbarrier_wait(unsigned long long* barrier, unsigned parity)
{
    asm volatile("{\n .reg .pred done;\n WAIT_MBARRIER:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT_MBARRIER;\n}\n" ::"r"((unsigned)__cvta_generic_to_shared(barrier)),
                 "r"(parity)
                 : "memory");
}
#endif
