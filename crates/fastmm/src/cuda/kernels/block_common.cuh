// Prepended to the cuda-fast kernels (fast.cu, fast_mma.cu): what every
// block does before its tile, the same in each.
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

__device__ __forceinline__ TileCoord raster_tile()
{
    const int tiles_n = gridDim.x, tiles_m = gridDim.y;
    const int id = blockIdx.y * tiles_n + blockIdx.x;
    const int per_group = RASTER_GROUP * tiles_n;
    const int first_row = (id / per_group) * RASTER_GROUP;
    const int rows = min(tiles_m - first_row, RASTER_GROUP);
    const int in_group = id % per_group;
    TileCoord t;
    t.row = first_row + in_group % rows;
    t.col = in_group / rows;
    return t;
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
