// Prepended to the cuda-fast kernels (fast.cu, fast_mma.cu): what every
// block does before its tile, the same in each.
//
// Block rasterization shared by the cuda-fast kernels: the launch order of
// blocks (x fastest, then y) is regrouped so that consecutive blocks walk
// down a strip of RASTER_GROUP tile rows before moving one tile column to
// the right. The blocks resident at one time then share a few panels of A
// and B in L2 instead of each wave streaming all of B from DRAM.
#define RASTER_GROUP 8

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
