// NVIDIA's own SIMT (FMA-unit) dgemm on this GPU, if cuBLASLt has one: the
// heuristic is asked only for algorithms whose numerical implementation is
// plain FMA (CUBLASLT_MATMUL_PREF_IMPL_MASK), and when it offers none every
// algorithm id whose capabilities say FMA is tried with each of its tiles
// and stages. Each candidate is timed (CUDA events, median of 10 after one
// warm-up) and checked against the default dgemm (FP64 tensor cores),
// which is timed too. Column-major n×n, C = A·B.
// Build: nvcc -O3 -arch=sm_90 cublaslt_simt_dgemm.cu -lcublasLt -lcublas -o cublaslt_simt_dgemm
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "probe_check.h"

struct Problem {
    int n;
    double *a, *b, *c, *reference;
    void* workspace;
    size_t workspace_bytes;
    cudaEvent_t start, stop;
};

static double tflops(int n, float ms) { return 2.0 * n * (double)n * n / (ms * 1e-3) / 1e12; }

static float median_ms(std::vector<float> times)
{
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

static double max_difference(const Problem& p)
{
    const size_t count = (size_t)p.n * p.n;
    std::vector<double> got(count), want(count);
    CUDA_CHECK(cudaMemcpy(got.data(), p.c, count * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(want.data(), p.reference, count * sizeof(double), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    return worst;
}

// Times one configured algorithm; returns the median in ms, or -1 when
// cuBLASLt refuses it.
static float time_algo(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t layout,
                       const cublasLtMatmulAlgo_t& algo, const Problem& p)
{
    const double one = 1.0, zero = 0.0;
    auto launch = [&]() {
        return cublasLtMatmul(lt, desc, &one, p.a, layout, p.b, layout, &zero, p.c, layout, p.c, layout,
                              &algo, p.workspace, p.workspace_bytes, 0);
    };
    CUDA_CHECK(cudaMemset(p.c, 0, (size_t)p.n * p.n * sizeof(double)));
    if (launch() != CUBLAS_STATUS_SUCCESS) return -1;
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> times;
    for (int rep = 0; rep < 10; ++rep) {
        CUDA_CHECK(cudaEventRecord(p.start));
        CUBLAS_CHECK(launch());
        CUDA_CHECK(cudaEventRecord(p.stop));
        CUDA_CHECK(cudaEventSynchronize(p.stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
        times.push_back(ms);
    }
    return median_ms(times);
}

static void describe(const cublasLtMatmulAlgo_t& algo, char* out, size_t size)
{
    int id = -1, tile = -1, stages = -1, splitk = -1, swizzle = -1;
    size_t written;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &written);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &written);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages,
                                         &written);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                         &written);
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                         sizeof swizzle, &written);
    uint64_t flags = 0;
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &flags, sizeof flags,
                                      &written);
    snprintf(out, size, "algo %d tile %d stages %d splitk %d swizzle %d impl-flags 0x%llx", id, tile,
             stages, splitk, swizzle, (unsigned long long)flags);
}

int main(int argc, char** argv)
{
    Problem p;
    p.n = argc > 1 ? atoi(argv[1]) : 8192;
    const int n = p.n;
    const size_t count = (size_t)n * n;
    std::vector<double> host(count);
    srand(7);
    for (auto& v : host) v = rand() / (double)RAND_MAX - 0.5;
    CUDA_CHECK(cudaMalloc(&p.a, count * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&p.b, count * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&p.c, count * sizeof(double)));
    CUDA_CHECK(cudaMalloc(&p.reference, count * sizeof(double)));
    CUDA_CHECK(cudaMemcpy(p.a, host.data(), count * sizeof(double), cudaMemcpyHostToDevice));
    for (auto& v : host) v = rand() / (double)RAND_MAX - 0.5;
    CUDA_CHECK(cudaMemcpy(p.b, host.data(), count * sizeof(double), cudaMemcpyHostToDevice));
    p.workspace_bytes = 64 << 20;
    CUDA_CHECK(cudaMalloc(&p.workspace, p.workspace_bytes));
    CUDA_CHECK(cudaEventCreate(&p.start));
    CUDA_CHECK(cudaEventCreate(&p.stop));

    // The default dgemm: reference values and the peer's time.
    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    const double one = 1.0, zero = 0.0;
    std::vector<float> times;
    for (int rep = 0; rep < 11; ++rep) {
        CUDA_CHECK(cudaEventRecord(p.start));
        CUBLAS_CHECK(cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, p.a, n, p.b, n, &zero,
                               p.reference, n));
        CUDA_CHECK(cudaEventRecord(p.stop));
        CUDA_CHECK(cudaEventSynchronize(p.stop));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
        if (rep > 0) times.push_back(ms);
    }
    const float dgemm_ms = median_ms(times);
    printf("n=%d cublasDgemm default: median %.3f ms, %.2f TFLOPS\n", n, dgemm_ms, tflops(n, dgemm_ms));

    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_64F, CUDA_R_64F));
    cublasLtMatrixLayout_t layout;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_64F, n, n, n));

    cublasLtMatmulPreference_t preference;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &p.workspace_bytes, sizeof p.workspace_bytes));
    const uint64_t fma_only = CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_IMPL_MASK, &fma_only,
                                                    sizeof fma_only));
    cublasLtMatmulHeuristicResult_t results[32];
    int found = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout,
                                                           preference, 32, results, &found);
    printf("heuristic, FMA-only mask: status %d, %d algorithms\n", (int)status, found);
    char text[256];
    float best = -1;
    for (int i = 0; i < found; ++i) {
        describe(results[i].algo, text, sizeof text);
        const float ms = time_algo(lt, desc, layout, results[i].algo, p);
        if (ms < 0) {
            printf("  %s: refused at launch\n", text);
            continue;
        }
        printf("  %s: median %.3f ms, %.2f TFLOPS, %.3fx dgemm, max |diff| %.3g\n", text, ms, tflops(n, ms),
               dgemm_ms / ms, max_difference(p));
        if (best < 0 || ms < best) best = ms;
    }

    // Every algorithm id cuBLASLt knows for this type, and those whose
    // capabilities say FMA, with each tile and stage count it lists.
    int ids[1024];
    int id_count = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F,
                                        CUDA_R_64F, CUDA_R_64F, 1024, ids, &id_count));
    printf("algorithm ids for 64F: %d\n", id_count);
    int tried = 0;
    for (int i = 0; i < id_count; ++i) {
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F,
                                   CUDA_R_64F, ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
            continue;
        uint64_t flags = 0;
        size_t written = 0;
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &flags, sizeof flags,
                                          &written);
        size_t tile_bytes = 0, stage_bytes = 0;
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, nullptr, 0, &tile_bytes);
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, nullptr, 0, &stage_bytes);
        std::vector<uint32_t> tiles(std::max<size_t>(tile_bytes / 4, 1), CUBLASLT_MATMUL_TILE_UNDEFINED);
        std::vector<uint32_t> stages(std::max<size_t>(stage_bytes / 4, 1), CUBLASLT_MATMUL_STAGES_UNDEFINED);
        if (tile_bytes)
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_TILE_IDS, tiles.data(), tile_bytes,
                                              &written);
        if (stage_bytes)
            cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS, stages.data(), stage_bytes,
                                              &written);
        printf("  id %d: impl-flags 0x%llx, %zu tiles, %zu stage counts\n", ids[i], (unsigned long long)flags,
               tiles.size(), stages.size());
        if ((flags & CUBLASLT_NUMERICAL_IMPL_FLAGS_OP_TYPE_MASK) != CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA) continue;
        printf("    tiles:");
        for (uint32_t tile : tiles) printf(" %u", tile);
        printf("; stages:");
        for (uint32_t stage : stages) printf(" %u", stage);
        printf("\n");
        {
            // The configuration AlgoInit gives, untouched.
            cublasLtMatmulHeuristicResult_t check;
            const cublasStatus_t verdict =
                cublasLtMatmulAlgoCheck(lt, desc, layout, layout, layout, layout, &algo, &check);
            describe(algo, text, sizeof text);
            printf("    as initialised (%s): check status %d, workspace %zu\n", text, (int)verdict,
                   check.workspaceSize);
            if (verdict == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= p.workspace_bytes) {
                const float ms = time_algo(lt, desc, layout, algo, p);
                if (ms > 0) {
                    printf("    %s: median %.3f ms, %.2f TFLOPS, %.3fx dgemm, max |diff| %.3g\n", text, ms,
                           tflops(n, ms), dgemm_ms / ms, max_difference(p));
                    if (best < 0 || ms < best) best = ms;
                }
            }
        }
        for (uint32_t tile : tiles) {
            for (uint32_t stage : stages) {
                if (tried >= 60) break;
                cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
                cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage,
                                                     sizeof stage);
                cublasLtMatmulHeuristicResult_t check;
                const cublasStatus_t verdict =
                    cublasLtMatmulAlgoCheck(lt, desc, layout, layout, layout, layout, &algo, &check);
                if (verdict != CUBLAS_STATUS_SUCCESS || check.workspaceSize > p.workspace_bytes) {
                    printf("    tile %u stages %u: check status %d\n", tile, stage, (int)verdict);
                    continue;
                }
                ++tried;
                describe(algo, text, sizeof text);
                const float ms = time_algo(lt, desc, layout, algo, p);
                if (ms < 0) {
                    printf("    %s: refused at launch\n", text);
                    continue;
                }
                printf("    %s: median %.3f ms, %.2f TFLOPS, %.3fx dgemm, max |diff| %.3g\n", text, ms,
                       tflops(n, ms), dgemm_ms / ms, max_difference(p));
                if (best < 0 || ms < best) best = ms;
            }
        }
    }
    if (best > 0)
        printf("best FMA-only cuBLASLt dgemm: %.3f ms, %.2f TFLOPS, %.3fx the default dgemm\n", best,
               tflops(n, best), dgemm_ms / best);
    else
        printf("no FMA-only cuBLASLt dgemm ran\n");
    return 0;
}
