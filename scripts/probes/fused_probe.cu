// Probe: the fused Strassen kernel (kernels/fused.cu) with one term per
// operand against cuda-fast (kernels/fast.cu) on one 8192^3 f32 product,
// kernel time between CUDA events, median of 9. Build twice, e.g.
//   nvcc -arch=sm_90 -O3 -DPROBE_FUSED -o fused_probe fused_probe.cu
//   nvcc -arch=sm_90 -O3 -o fast_probe fused_probe.cu
// (-DREG_TERMS=.. -DSTAGED_TERMS=.. vary the fused kernel's staging).
#include <algorithm>
#include <cstdio>
#include <vector>
#define ELEM float
#define ACC float
#define TM 8
#define TN 16
#define RASTER_GROUP 8
#include "../../crates/fastmm/src/cuda/kernels/block_common.cuh"
#include "../../crates/fastmm/src/cuda/kernels/simt_tile.cuh"
#ifdef PROBE_FUSED
#include "../../crates/fastmm/src/cuda/kernels/fused.cu"
#else
#include "../../crates/fastmm/src/cuda/kernels/fast.cu"
#endif

#define CHECK(x)                                                                   \
    do {                                                                           \
        cudaError_t e = (x);                                                       \
        if (e != cudaSuccess) {                                                    \
            printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));       \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(int argc, char** argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 8192;
    const size_t bytes = (size_t)n * n * sizeof(float);
    float *a, *b, *c;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc(&c, bytes));
    std::vector<float> h((size_t)n * n);
    for (size_t i = 0; i < h.size(); ++i) h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    CHECK(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice));
    dim3 grid(n / BN, n / BM, 1), block(THREADS);
#ifdef PROBE_FUSED
    // `terms` copies of A (and of B) per operand: C = terms^2 · A·B.
    const int terms = argc > 2 ? atoi(argv[2]) : 1;
    FusedGroup g = {};
    for (int t = 0; t < terms; ++t) {
        g.ptr[t] = (unsigned long long)a;
        g.ptr[terms + t] = (unsigned long long)b;
        g.weight[t] = g.weight[terms + t] = 1.0f;
    }
    g.ptr[2 * terms] = (unsigned long long)c;
    g.weight[2 * terms] = 1.0f;
    g.first[0][0] = 0, g.first[0][1] = terms, g.first[0][2] = 2 * terms;
    g.count[0][0] = g.count[0][1] = terms, g.count[0][2] = 1;
    printf("terms=%d ", terms);
    const int smem = TILE_BYTES + RAW_BYTES;
    CHECK(cudaFuncSetAttribute(gemm_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    auto launch = [&] { gemm_fused<<<grid, block, smem>>>(n, n, n, 1.0f, n, n, 0.0f, n, g, 1); };
    printf("fused STAGED_TERMS=%d smem=%d ", STAGED_TERMS, smem);
#else
    auto launch = [&] { gemm_fast<<<grid, block>>>(n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, 1, n, 0, 1 << 30); };
    printf("fast ");
#endif
    launch();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> ms;
    for (int r = 0; r < 9; ++r) {
        cudaEventRecord(e0);
        launch();
        cudaEventRecord(e1);
        CHECK(cudaEventSynchronize(e1));
        float t;
        cudaEventElapsedTime(&t, e0, e1);
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::vector<float> hc(16);
    CHECK(cudaMemcpy(hc.data(), c, 16 * sizeof(float), cudaMemcpyDeviceToHost));
    printf("n=%d median %.3f ms, %.2f TFLOPS, c[0]=%g\n", n, ms[4], 2.0 * n * n * (double)n / ms[4] / 1e9, hc[0]);
    return 0;
}
