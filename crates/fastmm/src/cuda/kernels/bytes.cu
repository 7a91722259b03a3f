// The memory-bound steps of the `emulated` algorithm on integers, around
// its INT8 tensor-core products; the reference twin is
// fastmm::emulation::bytes (Rust), whose doc comments state the
// arithmetic.
//
//   bytes_split    rows of A or columns of B, k-contiguous (transposed
//                  through shared memory for B), cut into DIGITS balanced
//                  base-256 digits, one INT8 plane each: the low byte read
//                  as a signed byte, the rest carried (exact)
//   bytes_combine  C = alpha * sum_s 256^s * P_s + beta * C modulo
//                  2^(8*DIGITS), from the DIGITS INT32 planes P_s
//
// ELEM is int or long long (-DELEM); the digits are its bytes.

#define DIGITS ((int)sizeof(ELEM))

// The unsigned twin of ELEM, in which the arithmetic wraps.
template <int N> struct bytes_unsigned;
template <> struct bytes_unsigned<4> { typedef unsigned int type; };
template <> struct bytes_unsigned<8> { typedef unsigned long long type; };
typedef bytes_unsigned<sizeof(ELEM)>::type UELEM;

// Vectors 0..count of len entries each: rows of x (ld apart) when rows,
// else columns (x[p * ld + v]); out holds DIGITS planes `plane` apart,
// each count vectors of kp entries (zero past len). Block 32 x 8, grid
// (ceil(kp / 32), ceil(count / 32)).
extern "C" __global__ void bytes_split(int count, int len, int kp, const ELEM* __restrict__ x,
                                       long long ld, int rows, signed char* __restrict__ out,
                                       long long plane)
{
    __shared__ ELEM tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int v0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
    for (int r = 0; r < 32; r += 8) {
        ELEM value = 0;
        if (rows) {
            const int v = v0 + ty + r, p = p0 + tx;
            if (v < count && p < len) value = x[(long long)v * ld + p];
            tile[ty + r][tx] = value;
        } else {
            const int v = v0 + tx, p = p0 + ty + r;
            if (v < count && p < len) value = x[(long long)p * ld + v];
            tile[tx][ty + r] = value;
        }
    }
    __syncthreads();
    for (int r = 0; r < 32; r += 8) {
        const int v = v0 + ty + r, p = p0 + tx;
        if (v >= count || p >= kp) continue;
        UELEM u = (UELEM)tile[ty + r][tx];
        signed char* o = out + (long long)v * kp + p;
#pragma unroll
        for (int d = 0; d < DIGITS; ++d) {
            const signed char digit = (signed char)(u & 0xFF);
            o[d * plane] = digit;
            // u - digit is a multiple of 256 modulo 2^(8*DIGITS).
            u = (u - (UELEM)(long long)digit) >> 8;
        }
    }
}

// Rows i0..i0+rows of C (ld ldc), n columns: C = alpha * sum_s 256^s *
// P_s + beta * C (C read only where read_c), the planes P_s INT32, rows x
// ldp each, `plane` apart. Block 256 threads; grid (ceil(n / 256), rows).
extern "C" __global__ void bytes_combine(int i0, int n, const int* __restrict__ planes,
                                         long long plane, long long ldp, ELEM alpha, ELEM beta,
                                         int read_c, ELEM* __restrict__ c, long long ldc)
{
    const int r = blockIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    const int* p = planes + (long long)r * ldp + j;
    UELEM sum = 0;
#pragma unroll
    for (int s = 0; s < DIGITS; ++s) {
        // Sign-extended to the width, then shifted: wrapping.
        sum += (UELEM)(ELEM)p[s * plane] << (8 * s);
    }
    ELEM* at = c + (long long)(i0 + r) * ldc + j;
    UELEM value = (UELEM)alpha * sum;
    if (read_c) value += (UELEM)beta * (UELEM)*at;
    *at = (ELEM)value;
}
