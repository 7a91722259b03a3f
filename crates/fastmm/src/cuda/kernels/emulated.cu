// The memory-bound steps of the emulated product (Ozaki scheme II) around
// its INT8 tensor-core products; the reference twin of every step is
// fastmm::emulation (Rust), whose doc comments state the arithmetic.
//
//   emu_stats_rows   E = floor(log2 max|x|), the 1-norm in units of 2^E,
//                    and the vector's state (0 zero, 1 scales, 2 NaN or
//                    inf), one warp per row
//   emu_cols_max / emu_cols_finish
//                    the same of columns, in chunks of the length spread
//                    over the grid, then combined per column in order
//   emu_split        rows of A or columns of B, k-contiguous (transposed
//                    through shared memory for B): 7-bit magnitudes
//                    (bits = 0) or the residues of rint(x*2^(bits-1-E))
//                    modulo the first nmod moduli, one INT8 plane each
//   emu_need         each element's fewest certified bits from the
//                    magnitude product, and their histogram
//   emu_accumulate   Garner's balanced digits from the INT32 products,
//                    Horner's rule in 64- or 128-bit integers (by the
//                    number of moduli, each count its own unrolled
//                    code), one rounding, the
//                    scaling back, C = alpha*x + beta*C; uncertified
//                    elements go to the fix-up list
//   emu_fixup        the listed elements natively (f64 sums), one warp each
//
// Every kernel but emu_fixup takes a batch of products along a grid
// dimension (z, or y for the statistics of rows and the columns' totals):
// product z reads its input xs (or gs) elements further on and writes its
// outputs one product's extent further on; a stride of 0 repeats one
// operand (a broadcast B is read, split and counted once).
//
// ELEM is float or double (-DELEM). Arithmetic whose result the Rust twin
// must reproduce bit for bit uses the _rn intrinsics, which are never
// contracted into fused multiply-adds.

#define EMU_UNCERTIFIED 255
#define EMU_MAX_BITS 62
#define EMU_MAG_BITS 7

// Modulus l, a constant wherever l is (loops over l are unrolled), so
// that % compiles to multiplications.
__device__ __forceinline__ int emu_modulus(int l)
{
    switch (l) {
    case 0: return 256;
    case 1: return 255;
    case 2: return 253;
    case 3: return 251;
    case 4: return 247;
    case 5: return 241;
    case 6: return 239;
    case 7: return 233;
    case 8: return 229;
    case 9: return 227;
    case 10: return 223;
    case 11: return 217;
    case 12: return 211;
    case 13: return 199;
    case 14: return 197;
    default: return 193;
    }
}

// Garner's tables: EMU_WEIGHT[l][j] = (m_0 * ... * m_{j-1}) mod m_l for
// j < l, EMU_INVERSE[l] = (m_0 * ... * m_{l-1})^-1 mod m_l.
__constant__ int EMU_WEIGHT[16][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 5, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 9, 72, 185, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 15, 210, 110, 136, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 17, 33, 223, 47, 137, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 23, 40, 101, 187, 55, 207, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 27, 15, 131, 134, 122, 90, 213, 0, 0, 0, 0, 0, 0, 0, 0},
    {1, 29, 131, 1, 24, 26, 137, 55, 103, 0, 0, 0, 0, 0, 0, 0},
    {1, 33, 164, 14, 169, 42, 87, 54, 94, 118, 0, 0, 0, 0, 0, 0},
    {1, 39, 180, 187, 65, 214, 145, 152, 45, 106, 192, 0, 0, 0, 0, 0},
    {1, 45, 81, 26, 196, 93, 47, 50, 45, 177, 89, 13, 0, 0, 0, 0},
    {1, 57, 8, 34, 176, 90, 198, 159, 33, 194, 59, 23, 16, 0, 0, 0},
    {1, 59, 73, 148, 112, 84, 150, 193, 53, 120, 54, 25, 106, 105, 0, 0},
    {1, 63, 46, 58, 83, 43, 134, 181, 99, 90, 165, 125, 105, 153, 146, 0},
};
__constant__ int EMU_INVERSE[16] = {
    1, 1, 211, 182, 246, 184, 41, 115, 161, 54, 163, 149, 46, 142, 91, 116,
};

__device__ double emu_i128_to_double(__int128 x);

// Garner's balanced mixed-radix digits of the residues p[l] (l < N), and
// the integer they stand for by Horner's rule, rounded once to a double:
// emu_crt_narrow for N <= 8 (64 bits), emu_crt_wide beyond (128).

// The balanced digits' integer for N <= 8 in unsigned operations: |p| <=
// 2^30 (EMULATION_K_CHUNK products of residues |r| <= 128) plus the
// multiple of m from 2^30 up is a nonnegative int below 2^31 + m with p's
// remainder, and each digit's sum s < 7*255*m stays below m*2048, so
// every remainder is one unsigned multiply-and-shift with no sign fix-up.
// The digits in [0, m) give x in [0, M); the balanced digits' range is
// [top - M + 1, top], top = sum of (ceil(m_l/2) - 1) * m_0...m_{l-1}, so
// x - M where x > top is the balanced digits' integer. Horner's rule
// runs in two 32-bit halves (m_0...m_3 and m_4...m_7 are each below
// 2^32) joined by one wide multiply-add.
template <int N>
__device__ __forceinline__ double emu_crt_narrow(const int* p)
{
    unsigned int d[N];
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const unsigned int m = (unsigned int)emu_modulus(l);
        const unsigned int lift = ((1u << 30) + m - 1) / m * m;
        const unsigned int r = ((unsigned int)p[l] + lift) % m;
        unsigned int s = 0;
#pragma unroll
        for (int q = 0; q < l; ++q) s += d[q] * (unsigned int)EMU_WEIGHT[l][q];
        d[l] = ((r + 2048u * m - s) * (unsigned int)EMU_INVERSE[l]) % m;
    }
    unsigned int lo = 0, hi = 0;
#pragma unroll
    for (int l = (N < 4 ? N : 4) - 1; l >= 0; --l) lo = lo * (unsigned int)emu_modulus(l) + d[l];
#pragma unroll
    for (int l = N - 1; l >= 4; --l) hi = hi * (unsigned int)emu_modulus(l) + d[l];
    unsigned long long low_radix = 1, M = 1, top = 0;
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const unsigned long long m = (unsigned long long)emu_modulus(l);
        top += ((m + 1) / 2 - 1) * M;
        M *= m;
        if (l < 4) low_radix = M;
    }
    const unsigned long long x = (unsigned long long)hi * low_radix + lo;
    return __ll2double_rn(x > top ? (long long)(x - M) : (long long)x);
}

// The integer of Garner's balanced digits for 8 < N <= 16, in unsigned
// operations as emu_crt_narrow takes them: each residue lifted to a
// nonnegative int, each digit one unsigned remainder (its sum s < 15*255*m
// stays below 4096*m), so the digits lie in [0, m) and give x in [0, M).
// Horner's rule runs in two 64-bit pieces, digits 0..7 (m_0...m_7 < 2^64)
// and 8..N-1 (m_8...m_15 < 2^62), joined by one 64x64 -> 128-bit
// multiply-add; x above the balanced range's top is x - M. The integer is
// the balanced digits' own, so the double is the same to the bit; the
// signed digits and a 128-bit Horner step per modulus took about half as
// many instructions again.
template <int N>
__device__ __forceinline__ double emu_crt_wide(const int* p)
{
    unsigned int d[N];
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const unsigned int m = (unsigned int)emu_modulus(l);
        const unsigned int lift = ((1u << 30) + m - 1) / m * m;
        const unsigned int r = ((unsigned int)p[l] + lift) % m;
        unsigned int s = 0;
#pragma unroll
        for (int q = 0; q < l; ++q) s += d[q] * (unsigned int)EMU_WEIGHT[l][q];
        d[l] = ((r + 4096u * m - s) * (unsigned int)EMU_INVERSE[l]) % m;
    }
    unsigned long long lo = 0, hi = 0;
#pragma unroll
    for (int l = 7; l >= 0; --l) lo = lo * (unsigned long long)emu_modulus(l) + d[l];
#pragma unroll
    for (int l = N - 1; l >= 8; --l) hi = hi * (unsigned long long)emu_modulus(l) + d[l];
    unsigned long long low_radix = 1;
    unsigned __int128 M = 1, top = 0;
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const unsigned long long m = (unsigned long long)emu_modulus(l);
        top += (unsigned __int128)((m + 1) / 2 - 1) * M;
        M *= m;
        if (l < 8) low_radix *= m;
    }
    const unsigned __int128 x = (unsigned __int128)hi * low_radix + lo;
    return emu_i128_to_double(x > top ? (__int128)(x - M) : (__int128)x);
}

template <int N>
__device__ __forceinline__ double emu_crt(const int* p)
{
    return N <= 8 ? emu_crt_narrow<(N <= 8 ? N : 8)>(p) : emu_crt_wide<(N > 8 ? N : 9)>(p);
}

// 2^e for a normal power (-1022 <= e <= 1023): a multiplication by it is
// ldexp's result.
__device__ __forceinline__ double emu_pow2(int e)
{
    return __longlong_as_double((long long)(e + 1023) << 52);
}

// x * 2^e, the same double as ldexp(x, e) (the exact product, rounded once
// where it is subnormal), by one multiplication where 2^e is a normal
// double: ldexp's general code costs more than the rest of a split.
__device__ __forceinline__ double emu_scale(double x, int e)
{
    if (e >= -1022 && e <= 1023) return __dmul_rn(x, emu_pow2(e));
    return ldexp(x, e);
}

// The balanced residues of four integers x[i] (|x| <= 2^30) modulo the
// first N moduli, packed into one word per plane (byte i from x[i]) at
// out[l * plane], which is 4-byte aligned. x + K_m, K_m = 2^30 plus the
// remainder of floor(m/2) - 2^30 modulo m, lies in [0, 2^31 + m) and is
// x + floor(m/2) modulo m, so its unsigned remainder (a multiply and a
// shift for a constant m) less floor(m/2) is the balanced residue: about
// five integer operations per modulus where the FP64 path takes a dozen.
template <int N>
__device__ __forceinline__ void emu_residues_x4(const int* x, signed char* out, long long plane)
{
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const int m = emu_modulus(l);
        const unsigned int k = (1u << 30) + (unsigned int)((((m / 2) - (1 << 30)) % m + m) % m);
        unsigned int word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = (int)(((unsigned int)x[i] + k) % (unsigned int)m) - m / 2;
            word |= ((unsigned int)r & 0xffu) << (8 * i);
        }
        *(unsigned int*)(out + l * plane) = word;
    }
}

// The balanced residues of four integers x[i] (|x| <= 2^52) modulo the
// first N moduli, one word per plane as in emu_residues_x4: x = x2*2^36 +
// x1*2^18 + x0 with x0, x1 in [0, 2^18) and x2 = x >> 36 (floor, |x2| <=
// 2^16). Lifted by K (the multiple of m from 2^16 up), x2 + K is
// nonnegative, and x + H (H = floor(m/2)) is congruent modulo m to
// (x2 + K)*C2 + x1*C1 + x0 + H with C1 = 2^18 mod m, C2 = 2^36 mod m, a sum
// below 2^27; its remainder less H is the balanced residue. One
// remainder by a constant (a multiply-high and a shift) and two
// multiply-adds per entry and modulus: ncu had the two-piece form
// (two remainders) issue-bound at 81% of the SMs.
template <int N>
__device__ __forceinline__ void emu_residues_x4_limbs(const long long* x, signed char* out, long long plane)
{
    unsigned int x0[4], x1[4];
    int x2[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned long long u = (unsigned long long)x[i];
        x0[i] = (unsigned int)(u & 0x3ffffull);
        x1[i] = (unsigned int)((u >> 18) & 0x3ffffull);
        x2[i] = (int)(x[i] >> 36);
    }
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const unsigned int m = (unsigned int)emu_modulus(l);
        const unsigned int k = ((1u << 16) + m - 1u) / m * m;
        const unsigned int c1 = (unsigned int)((1ull << 18) % m);
        const unsigned int c2 = (unsigned int)((1ull << 36) % m);
        const unsigned int h = m / 2u;
        unsigned int word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const unsigned int sum = ((unsigned int)x2[i] + k) * c2 + x1[i] * c1 + x0[i] + h;
            const int r = (int)(sum % m) - (int)h;
            word |= ((unsigned int)r & 0xffu) << (8 * i);
        }
        *(unsigned int*)(out + l * plane) = word;
    }
}

// The balanced residues of four integers x[i] (|x| <= 2^62) modulo the
// first N moduli, one word per plane as in emu_residues_x4: x = hi*2^32 +
// lo with hi = x >> 32 (floor, |hi| <= 2^30) and lo in [0, 2^32). hi + K
// (K the multiple of m from 2^30 up) is a nonnegative integer below 2^32
// whose remainder t is hi's modulo m, so x + H (H = floor(m/2)) is
// t*W + (lo mod m) + H modulo m, W = 2^32 mod m; its remainder less H is
// the balanced residue.
template <int N>
__device__ __forceinline__ void emu_residues_x4_wide(const long long* x, signed char* out, long long plane)
{
    int hi[4];
    unsigned int lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        hi[i] = (int)(x[i] >> 32);
        lo[i] = (unsigned int)((unsigned long long)x[i] & 0xffffffffull);
    }
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const unsigned int m = (unsigned int)emu_modulus(l);
        const unsigned int k = ((1u << 30) + m - 1u) / m * m;
        const unsigned int w = (unsigned int)((1ull << 32) % m);
        const unsigned int h = m / 2u;
        unsigned int word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            // In unsigned arithmetic: hi + k < 2^31 + m, past int's range.
            const unsigned int t = ((unsigned int)hi[i] + k) % m;
            const int r = (int)((t * w + lo[i] % m + h) % m) - (int)h;
            word |= ((unsigned int)r & 0xffu) << (8 * i);
        }
        *(unsigned int*)(out + l * plane) = word;
    }
}

// How many of a lane's entries the statistics load before taking them.
#define EMU_STATS_AHEAD 8

// |x| <= DBL_MAX, false for NaN and inf.
__device__ __forceinline__ bool emu_finite(double x)
{
    return fabs(x) <= 1.7976931348623157e308;
}

// One entry |a| of a one-pass norm: the running largest `top`, the sum
// of the entries in units of 2^el (el the exponent of the largest so
// far, `above` = 2^(el+1)), rescaled exactly by a power of two when a
// larger exponent comes; a NaN or inf sets `bad` instead.
__device__ __forceinline__ void emu_norm_step(double a, double& top, double& sum, double& above,
                                              int& el, int& bad)
{
    if (!emu_finite(a)) {
        bad = 1;
        return;
    }
    if (a >= above && a > 0.0) {
        const int e = ilogb(a);
        if (top > 0.0) sum = emu_scale(sum, el - e);
        el = e;
        above = emu_scale(1.0, e + 1);
    }
    top = fmax(top, a);
    if (a > 0.0) sum += emu_scale(a, -el);
}

// Statistics of `count` rows of `len` entries, row v at x + v*ld; one
// warp per row, 8 rows per block of 32x8 (shuffles, no barriers, so that
// short rows do not leave the GPU waiting on block-wide reductions), grid
// (ceil(count/8), products). Each product's largest norm goes into
// tops[z] (zeroed first) as the bits of a non-negative double, whose
// order is the double's: an atomic max of the bits is one of the norms.
extern "C" __global__ void emu_stats_rows(int count, int len, const ELEM* __restrict__ x,
                                          long long ld, long long xs, int* __restrict__ exps,
                                          double* __restrict__ norms, int* __restrict__ states,
                                          unsigned long long* __restrict__ tops)
{
    const int v = blockIdx.x * 8 + threadIdx.y;
    if (v >= count) return;
    const long long z = blockIdx.y;
    const ELEM* row = x + z * xs + (long long)v * ld;
    // One pass: each lane sums its entries in units of 2^el, el the
    // exponent of its largest so far, rescaling its sum when a larger
    // exponent comes; the lanes' sums are then rescaled to the row's E and
    // added as before. Powers of two rescale exactly (short of
    // subnormals, far below the certificate's slack), so the norm is the
    // one a second pass in units of 2^E would give, for one read of the
    // row instead of two.
    double top = 0.0, sum = 0.0, above = 0.0;
    int el = 0, bad = 0;
    // EMU_STATS_AHEAD of a lane's entries are loaded before any is taken,
    // so that a warp has that many loads in flight instead of one (the
    // step's branches kept each load waiting on the last): a row's
    // statistics were a chain of len/32 memory latencies. The entries are
    // taken in the same order, so the norm is the same.
    int p = threadIdx.x;
    for (; p + 32 * (EMU_STATS_AHEAD - 1) < len; p += 32 * EMU_STATS_AHEAD) {
        double v[EMU_STATS_AHEAD];
#pragma unroll
        for (int u = 0; u < EMU_STATS_AHEAD; ++u) v[u] = fabs((double)row[p + 32 * u]);
#pragma unroll
        for (int u = 0; u < EMU_STATS_AHEAD; ++u) emu_norm_step(v[u], top, sum, above, el, bad);
    }
    for (; p < len; p += 32) emu_norm_step(fabs((double)row[p]), top, sum, above, el, bad);
    double row_top = top;
    for (int o = 16; o > 0; o >>= 1)
        row_top = fmax(row_top, __shfl_xor_sync(0xffffffffu, row_top, o));
    bad = __any_sync(0xffffffffu, bad);
    const int state = bad ? 2 : (row_top == 0.0 ? 0 : 1);
    const int e = state == 1 ? ilogb(row_top) : 0;
    sum = (state == 1 && top > 0.0) ? emu_scale(sum, el - e) : 0.0;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x == 0) {
        const long long at = z * count + v;
        exps[at] = e;
        norms[at] = state == 1 ? sum : 0.0;
        states[at] = state;
        if (state == 1) atomicMax(&tops[z], (unsigned long long)__double_as_longlong(sum));
    }
}

// Statistics of `count` columns of `len` entries, entry p of column v at
// x[p*ld + v], in two steps so that a few long columns still spread over
// every SM, with one read of the columns. Blocks of 32 columns x 8 lanes,
// grid (ceil(count/32), chunks), block row c taking entries c*chunk.. of
// its columns:
// (1) emu_cols_max: each column's largest finite |x| into top_bits (the
//     bits of a non-negative double order as the double does, so an
//     atomic max of the bits is one of the values) and any NaN or inf into
//     bad, both zeroed first; and the chunk's sum of |x| in units of 2^ec,
//     ec the exponent of the chunk's largest, into partial[c*count + v]
//     and ec into pexp (each lane summing in units of its own largest so
//     far, rescaled exactly by powers of two as emu_stats_rows does);
// (2) emu_cols_finish (one thread per column, grid (.., products)): the
//     chunks' sums rescaled to the column's E and added in order, E and
//     the state, and each product's largest norm into tops[z] as
//     emu_stats_rows does. The sums are those a second pass in units of
//     2^E would give, and the same on every run. The passes' grids take
//     the products along z.
extern "C" __global__ void emu_cols_max(int count, int len, int chunk,
                                        const ELEM* __restrict__ x, long long ld, long long xs,
                                        unsigned long long* __restrict__ top_bits,
                                        int* __restrict__ bad, double* __restrict__ partial,
                                        int* __restrict__ pexp)
{
    __shared__ double part[8][33];
    __shared__ double psum[8][33];
    __shared__ int pe[8][33];
    __shared__ int flag[8][33];
    const long long z = blockIdx.z;
    x += z * xs;
    top_bits += z * count;
    bad += z * count;
    partial += z * gridDim.y * (long long)count;
    pexp += z * gridDim.y * (long long)count;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int v = blockIdx.x * 32 + tx;
    const int p0 = blockIdx.y * chunk, p1 = min(len, p0 + chunk);
    double top = 0.0, sum = 0.0, above = 0.0;
    int el = 0, b = 0;
    if (v < count) {
        // Loads ahead of the steps, in the same order (as emu_stats_rows).
        int p = p0 + ty;
        for (; p + 8 * (EMU_STATS_AHEAD - 1) < p1; p += 8 * EMU_STATS_AHEAD) {
            double w[EMU_STATS_AHEAD];
#pragma unroll
            for (int u = 0; u < EMU_STATS_AHEAD; ++u)
                w[u] = fabs((double)x[(long long)(p + 8 * u) * ld + v]);
#pragma unroll
            for (int u = 0; u < EMU_STATS_AHEAD; ++u) emu_norm_step(w[u], top, sum, above, el, b);
        }
        for (; p < p1; p += 8)
            emu_norm_step(fabs((double)x[(long long)p * ld + v]), top, sum, above, el, b);
    }
    part[ty][tx] = top;
    psum[ty][tx] = sum;
    pe[ty][tx] = el;
    flag[ty][tx] = b;
    __syncthreads();
    if (ty == 0 && v < count) {
        for (int r = 1; r < 8; ++r) {
            top = fmax(top, part[r][tx]);
            b |= flag[r][tx];
        }
        const int ec = top > 0.0 ? ilogb(top) : 0;
        double s = 0.0;
        for (int r = 0; r < 8; ++r)
            if (part[r][tx] > 0.0) s += emu_scale(psum[r][tx], pe[r][tx] - ec);
        partial[(long long)blockIdx.y * count + v] = s;
        pexp[(long long)blockIdx.y * count + v] = ec;
        if (top > 0.0) atomicMax(&top_bits[v], (unsigned long long)__double_as_longlong(top));
        if (b) atomicOr(&bad[v], 1);
    }
}

// A column's state (0 zero, 1 scales, 2 NaN or inf) and its largest |x|.
__device__ __forceinline__ int emu_col_state(unsigned long long bits, int bad, double* top)
{
    *top = __longlong_as_double((long long)bits);
    return bad != 0 ? 2 : (*top == 0.0 ? 0 : 1);
}

extern "C" __global__ void emu_cols_finish(int count, int chunks,
                                           const unsigned long long* __restrict__ top_bits,
                                           const int* __restrict__ bad,
                                           const double* __restrict__ partial,
                                           const int* __restrict__ pexp,
                                           int* __restrict__ exps, double* __restrict__ norms,
                                           int* __restrict__ states,
                                           unsigned long long* __restrict__ tops)
{
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= count) return;
    const long long z = blockIdx.y;
    top_bits += z * count;
    bad += z * count;
    partial += z * chunks * (long long)count;
    pexp += z * chunks * (long long)count;
    exps += z * count;
    norms += z * count;
    states += z * count;
    double top;
    const int state = emu_col_state(top_bits[v], bad[v], &top);
    const int e = state == 1 ? ilogb(top) : 0;
    double s = 0.0;
    if (state == 1)
        for (int c = 0; c < chunks; ++c) {
            const long long at = (long long)c * count + v;
            s += emu_scale(partial[at], pexp[at] - e);
        }
    exps[v] = e;
    norms[v] = state == 1 ? s : 0.0;
    states[v] = state;
    if (state == 1) atomicMax(&tops[z], (unsigned long long)__double_as_longlong(s));
}

// Vectors v0.. of `len` entries into k-contiguous INT8 planes:
// out[l*plane + v*kp + p] for p < kp (zero past len). Entry (v, p) is at
// x[v*ld + p] when `rows`, else at x[p*ld + v] (columns of B, transposed
// here through a 32x32 tile). bits = 0: one plane of magnitudes
// floor(|x|*2^(6-E)); else nmod planes of residues of rint(x*2^(bits-1-E)).
// Block 32x8; grid (kp/32, ceil(count/32), products), product z's planes
// os bytes after the previous product's.
extern "C" __global__ void emu_split(int count, int len, int kp, const ELEM* __restrict__ x,
                                     long long ld, long long xs, int rows,
                                     const int* __restrict__ exps,
                                     const int* __restrict__ states, int bits, int nmod,
                                     signed char* __restrict__ out, long long plane,
                                     long long os)
{
    __shared__ double tile[32][33];
    const long long z = blockIdx.z;
    x += z * xs;
    exps += z * count;
    states += z * count;
    out += z * os;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int v0 = blockIdx.y * 32, p0 = blockIdx.x * 32;
    for (int r = 0; r < 32; r += 8) {
        double value = 0.0;
        if (rows) {
            const int v = v0 + ty + r, p = p0 + tx;
            if (v < count && p < len) value = (double)x[(long long)v * ld + p];
            tile[ty + r][tx] = value;
        } else {
            const int v = v0 + tx, p = p0 + ty + r;
            if (v < count && p < len) value = (double)x[(long long)p * ld + v];
            tile[tx][ty + r] = value;
        }
    }
    __syncthreads();
    // Each thread takes four consecutive entries of one vector, so that
    // each plane gets one 4-byte store of them (kp, plane and os are
    // multiples of 32 bytes, p of 4).
    const int t = ty * 32 + tx;
    const int tv = t / 8, tp = (t % 8) * 4;
    const int v = v0 + tv, p = p0 + tp;
    if (v >= count || p >= kp) return;
    const bool live = states[v] == 1;
    const int e = exps[v];
    signed char* o = out + (long long)v * kp + p;
    if (bits == 0) {
        unsigned int word = 0;
        for (int i = 0; i < 4; ++i) {
            const bool scales = live && p + i < len;
            const int mag = scales ? (int)floor(emu_scale(fabs(tile[tv][tp + i]), EMU_MAG_BITS - 1 - e)) : 0;
            word |= ((unsigned int)mag & 0xffu) << (8 * i);
        }
        *(unsigned int*)o = word;
        return;
    }
    if (bits <= 30) {
        // |x| < 2^(E+1), so |rint(x*2^(bits-1-E))| <= 2^bits <= 2^30.
        int xi[4];
        for (int i = 0; i < 4; ++i)
            xi[i] = live && p + i < len ? __double2int_rn(emu_scale(tile[tv][tp + i], bits - 1 - e)) : 0;
        switch (nmod) {
        case 1: emu_residues_x4<1>(xi, o, plane); break;
        case 2: emu_residues_x4<2>(xi, o, plane); break;
        case 3: emu_residues_x4<3>(xi, o, plane); break;
        case 4: emu_residues_x4<4>(xi, o, plane); break;
        case 5: emu_residues_x4<5>(xi, o, plane); break;
        case 6: emu_residues_x4<6>(xi, o, plane); break;
        case 7: emu_residues_x4<7>(xi, o, plane); break;
        case 8: emu_residues_x4<8>(xi, o, plane); break;
        case 9: emu_residues_x4<9>(xi, o, plane); break;
        case 10: emu_residues_x4<10>(xi, o, plane); break;
        case 11: emu_residues_x4<11>(xi, o, plane); break;
        case 12: emu_residues_x4<12>(xi, o, plane); break;
        case 13: emu_residues_x4<13>(xi, o, plane); break;
        case 14: emu_residues_x4<14>(xi, o, plane); break;
        case 15: emu_residues_x4<15>(xi, o, plane); break;
        default: emu_residues_x4<16>(xi, o, plane); break;
        }
        return;
    }
    // Wider integers (|x| <= 2^62, exact in a double: a power-of-two
    // scaling of a double is rounded to an integer only below 2^53) are
    // converted once and reduced in 32-bit pieces, one word per plane.
    long long xl[4];
    for (int i = 0; i < 4; ++i)
        xl[i] = live && p + i < len ? __double2ll_rn(emu_scale(tile[tv][tp + i], bits - 1 - e)) : 0;
    if (bits <= 52) {
        switch (nmod) {
        case 1: emu_residues_x4_limbs<1>(xl, o, plane); break;
        case 2: emu_residues_x4_limbs<2>(xl, o, plane); break;
        case 3: emu_residues_x4_limbs<3>(xl, o, plane); break;
        case 4: emu_residues_x4_limbs<4>(xl, o, plane); break;
        case 5: emu_residues_x4_limbs<5>(xl, o, plane); break;
        case 6: emu_residues_x4_limbs<6>(xl, o, plane); break;
        case 7: emu_residues_x4_limbs<7>(xl, o, plane); break;
        case 8: emu_residues_x4_limbs<8>(xl, o, plane); break;
        case 9: emu_residues_x4_limbs<9>(xl, o, plane); break;
        case 10: emu_residues_x4_limbs<10>(xl, o, plane); break;
        case 11: emu_residues_x4_limbs<11>(xl, o, plane); break;
        case 12: emu_residues_x4_limbs<12>(xl, o, plane); break;
        case 13: emu_residues_x4_limbs<13>(xl, o, plane); break;
        case 14: emu_residues_x4_limbs<14>(xl, o, plane); break;
        case 15: emu_residues_x4_limbs<15>(xl, o, plane); break;
        default: emu_residues_x4_limbs<16>(xl, o, plane); break;
        }
        return;
    }
    switch (nmod) {
    case 1: emu_residues_x4_wide<1>(xl, o, plane); break;
    case 2: emu_residues_x4_wide<2>(xl, o, plane); break;
    case 3: emu_residues_x4_wide<3>(xl, o, plane); break;
    case 4: emu_residues_x4_wide<4>(xl, o, plane); break;
    case 5: emu_residues_x4_wide<5>(xl, o, plane); break;
    case 6: emu_residues_x4_wide<6>(xl, o, plane); break;
    case 7: emu_residues_x4_wide<7>(xl, o, plane); break;
    case 8: emu_residues_x4_wide<8>(xl, o, plane); break;
    case 9: emu_residues_x4_wide<9>(xl, o, plane); break;
    case 10: emu_residues_x4_wide<10>(xl, o, plane); break;
    case 11: emu_residues_x4_wide<11>(xl, o, plane); break;
    case 12: emu_residues_x4_wide<12>(xl, o, plane); break;
    case 13: emu_residues_x4_wide<13>(xl, o, plane); break;
    case 14: emu_residues_x4_wide<14>(xl, o, plane); break;
    case 15: emu_residues_x4_wide<15>(xl, o, plane); break;
    default: emu_residues_x4_wide<16>(xl, o, plane); break;
    }
}

// The exponent field of a positive finite double: ilogb for a normal one,
// lower for a subnormal; only a walk's start, which any value gives the
// same end.
__device__ __forceinline__ int emu_exponent_field(double x)
{
    return (int)((unsigned long long)__double_as_longlong(x) >> 52) - 1023;
}

// The fewest bits that certify an element (fastmm::emulation::certify::
// bits_needed, operation for operation).
__device__ int emu_bits_needed(int rs, double rn, int cs, double cn, double g, double k,
                               double tau, double slack)
{
    if (rs == 2 || cs == 2) return EMU_UNCERTIFIED;
    if (rs == 0 || cs == 0) return 0;
    if (g <= 0.0) return EMU_UNCERTIFIED;
    const double p = __dmul_rn(__dadd_rn(rn, cn), slack);
    const double allowed = __dmul_rn(tau, emu_scale(g, -2 * (EMU_MAG_BITS - 1)));
    // The fewest b with p*2^-b + k*2^-2b <= allowed: the test only grows
    // truer as b grows, so the two walks below end on that b from any
    // start; a start one or two off log2(p / allowed), from the two
    // exponent fields, spares a logarithm and a division. A non-finite p
    // or an allowance of 0 or inf starts at an end. Within the walks b is
    // 1..EMU_MAX_BITS + 1, so 2^-b and 2^-2b are normal powers: a
    // multiplication by each is ldexp's result, without emu_scale's
    // out-of-range path in the loop.
    int b;
    if (!emu_finite(p) || !emu_finite(allowed) || allowed == 0.0)
        b = !emu_finite(p) || allowed == 0.0 ? EMU_MAX_BITS : 1;
    else
        b = min(max(emu_exponent_field(p) - emu_exponent_field(allowed) + 1, 1), EMU_MAX_BITS);
    while (b > 1 && __dadd_rn(__dmul_rn(p, emu_pow2(-(b - 1))), __dmul_rn(k, emu_pow2(-2 * (b - 1)))) <= allowed) --b;
    while (b <= EMU_MAX_BITS && !(__dadd_rn(__dmul_rn(p, emu_pow2(-b)), __dmul_rn(k, emu_pow2(-2 * b))) <= allowed)) ++b;
    return b > EMU_MAX_BITS ? EMU_UNCERTIFIED : b;
}

// Rows i0..i0+rows of the need of every element, from the magnitude
// product g (rows x n, ld ldg), and their histogram (256 bins, added to).
// Block 256 threads, each taking 4 elements 256 apart per step of 1024
// columns, the block's steps gridDim.x * 1024 apart, so that a block's
// fixed work (its bins, two barriers, the flush) and each element's
// latency spread over more elements; grid (at most ceil(n/1024), rows,
// products): product z's g gs
// entries on, its row and column statistics rs and cs entries on, its
// needs ns bytes on and its own histogram. A second magnitude product g2
// (a complex product's imaginary part's, at g's ld and strides; null
// where there is none) makes the need the larger of the two.
extern "C" __global__ void emu_need(int i0, int n, int k, const int* __restrict__ g,
                                    const int* __restrict__ g2, long long ldg,
                                    long long gs, const int* __restrict__ row_states,
                                    const double* __restrict__ row_norms, long long rs,
                                    const int* __restrict__ col_states,
                                    const double* __restrict__ col_norms, long long cs,
                                    double tau, double slack, unsigned char* __restrict__ need,
                                    long long ns, unsigned long long* __restrict__ histogram)
{
    __shared__ unsigned int bins[256];
    const long long z = blockIdx.z;
    g += z * gs;
    if (g2 != nullptr) g2 += z * gs;
    row_states += z * rs;
    row_norms += z * rs;
    col_states += z * cs;
    col_norms += z * cs;
    need += z * ns;
    histogram += z * 256;
    for (int t = threadIdx.x; t < 256; t += blockDim.x) bins[t] = 0;
    __syncthreads();
    const int r = blockIdx.y, i = i0 + r;
    const int rs_ = row_states[i];
    const double rn = row_norms[i];
    for (int jb = blockIdx.x * 1024; jb < n; jb += gridDim.x * 1024) {
        // The four elements' inputs are read first, so that their loads are
        // in flight together.
        int cst[4], gv[4], gv2[4];
        double cnv[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = jb + q * 256 + threadIdx.x;
            cst[q] = j < n ? col_states[j] : 0;
            cnv[q] = j < n ? col_norms[j] : 0.0;
            gv[q] = j < n ? g[(long long)r * ldg + j] : 0;
            gv2[q] = (j < n && g2 != nullptr) ? g2[(long long)r * ldg + j] : 0;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = jb + q * 256 + threadIdx.x;
            int b = -1;
            if (j < n) {
                b = emu_bits_needed(rs_, rn, cst[q], cnv[q], (double)gv[q], (double)k, tau, slack);
                if (g2 != nullptr)
                    b = max(b, emu_bits_needed(rs_, rn, cst[q], cnv[q], (double)gv2[q],
                                               (double)k, tau, slack));
                need[(long long)i * n + j] = (unsigned char)b;
            }
            // The lanes that need the same bits count together, one
            // atomic per distinct need in the warp: a lane per element
            // contended on the few bins that uniform data fills (ncu had
            // the kernel SM-bound at 92% with 2.2 ms at n = 16384).
            const unsigned int peers = __match_any_sync(0xffffffffu, b);
            if (b >= 0 && (int)(threadIdx.x % 32) == __ffs(peers) - 1)
                atomicAdd(&bins[b], (unsigned int)__popc(peers));
        }
    }
    __syncthreads();
    for (int t = threadIdx.x; t < 256; t += blockDim.x)
        if (bins[t] != 0) atomicAdd(&histogram[t], (unsigned long long)bins[t]);
}

// A 128-bit integer rounded once to the nearest double (ties to even):
// the top 64 bits with the rest folded into a sticky bit round exactly
// as the whole, since 64 - 53 >= 2 guard bits remain.
__device__ double emu_i128_to_double(__int128 x)
{
    const bool negative = x < 0;
    const unsigned __int128 u = negative ? (unsigned __int128)0 - (unsigned __int128)x : (unsigned __int128)x;
    const unsigned long long hi = (unsigned long long)(u >> 64);
    double r;
    if (hi == 0) {
        r = __ull2double_rn((unsigned long long)u);
    } else {
        const int s = 64 - __clzll((long long)hi);
        unsigned long long top = (unsigned long long)(u >> s);
        if ((u & (((unsigned __int128)1 << s) - 1)) != 0) top |= 1ull;
        r = ldexp(__ull2double_rn(top), s);
    }
    return negative ? -r : r;
}

// One thread's share of a row of C in emu_accumulate: row i, columns j0,
// j0 + 256, j0 + 512 and j0 + 768 (those below n), the row's products
// (plane l at planes + l * plane: INT32 sums, or P = signed char residues
// congruent to them, which the CRT takes alike), needs, exponent and C.
template <typename T, typename P = int> struct EmuRow {
    int i, j0, n;
    const P* __restrict__ planes;
    long long plane;
    int bits;
    const unsigned char* __restrict__ need;
    int row_e;
    const int* __restrict__ col_exps;
    double alpha, beta;
    T* __restrict__ c;
    unsigned int* __restrict__ fix_count;
    unsigned long long* __restrict__ fix_list;
    unsigned int fix_cap;
};

// One element of an EmuRow from its INT32 products v: its digits,
// scaling and store, or its place on the fix-up list.
template <int N, typename T, typename P>
__device__ __forceinline__ void emu_accumulate_one(const EmuRow<T, P>& w, int j, int need, int col_e,
                                                   const int* v)
{
    if (need > w.bits) {
        const unsigned int slot = atomicAdd(w.fix_count, 1u);
        if (slot < w.fix_cap) w.fix_list[slot] = (unsigned long long)((long long)w.i * w.n + j);
        return;
    }
    const double product = emu_scale(emu_crt<N>(v), w.row_e + col_e + 2 - 2 * w.bits);
    double value = __dmul_rn(w.alpha, product);
    if (w.beta != 0.0) value = __dadd_rn(value, __dmul_rn(w.beta, (double)w.c[j]));
    w.c[j] = (T)value;
}

// The four elements of an EmuRow, one after another, each element's
// products, need and exponent loaded while the one before is computed:
// without them in flight, ncu saw the kernel at 47% of DRAM's bandwidth
// and 71% of the SMs' issue rate, waiting on its loads (N <= 8), and at
// 48% and 50% beyond 8 moduli.
template <int N, typename T, typename P>
__device__ __forceinline__ void emu_accumulate_x4_ahead(const EmuRow<T, P>& w)
{
    if (w.j0 >= w.n) return;
    int v[N], ahead[N];
#pragma unroll
    for (int l = 0; l < N; ++l) v[l] = w.planes[l * w.plane + w.j0];
    int need = w.need[w.j0], col_e = w.col_exps[w.j0];
#pragma unroll 1
    for (int q = 0; q < 4; ++q) {
        const int j = w.j0 + 256 * q, next = j + 256;
        const bool more = q < 3 && next < w.n;
        int need_ahead = 0, col_ahead = 0;
        if (more) {
#pragma unroll
            for (int l = 0; l < N; ++l) ahead[l] = w.planes[l * w.plane + next];
            need_ahead = w.need[next];
            col_ahead = w.col_exps[next];
        }
        emu_accumulate_one<N, T, P>(w, j, need, col_e, v);
        if (!more) return;
#pragma unroll
        for (int l = 0; l < N; ++l) v[l] = ahead[l];
        need = need_ahead;
        col_e = col_ahead;
    }
}

// Rows i0..i0+rows of C from the nmod INT32 products (plane l at
// planes + l*plane, rows x n with ld ldp): C = alpha*x*2^(E_i+F_j+2-2b) +
// beta*C (beta = 0 never reads C). Elements whose need exceeds `bits` are
// appended to the fix-up list instead. Block 256; each thread takes 4
// elements 256 apart: grid (ceil(n/1024), rows, products), product z's
// planes ps entries on, its needs ns, its exponents rs and cs, its C cs_c
// elements, its count and list its own. emu_accumulate takes 1 to 8
// moduli and emu_accumulate_wide 9 to 16: a kernel's registers are its
// widest path's, and 16 moduli loaded ahead would set f32's occupancy.
#define EMU_ACCUMULATE_ARGS(P)                                                                 \
    int i0, int n, const P* __restrict__ planes, long long plane, long long ldp, long long ps,  \
        int nmod, int bits, const unsigned char* __restrict__ need, long long ns,               \
        const int* __restrict__ row_exps, long long rs, const int* __restrict__ col_exps,       \
        long long cs, double alpha, double beta, ELEM* __restrict__ c, long long ldc,           \
        long long cs_c, unsigned int* __restrict__ fix_count,                                   \
        unsigned long long* __restrict__ fix_list, unsigned int fix_cap
#define EMU_ACCUMULATE_ROW(P)                                                                     \
    const long long z = blockIdx.z;                                                               \
    const int r = blockIdx.y, i = i0 + r;                                                         \
    const EmuRow<ELEM, P> row = {i, blockIdx.x * 1024 + (int)threadIdx.x, n,                     \
                                 planes + z * ps + (long long)r * ldp, plane, bits,               \
                                 need + z * ns + (long long)i * n, row_exps[z * rs + i],          \
                                 col_exps + z * cs, alpha, beta, c + z * cs_c + (long long)i * ldc, \
                                 fix_count + z, fix_list + z * (long long)fix_cap, fix_cap};

template <typename P> __device__ __forceinline__ void emu_accumulate_narrow(const EmuRow<ELEM, P>& row, int nmod)
{
    switch (nmod) {
    case 1: emu_accumulate_x4_ahead<1>(row); break;
    case 2: emu_accumulate_x4_ahead<2>(row); break;
    case 3: emu_accumulate_x4_ahead<3>(row); break;
    case 4: emu_accumulate_x4_ahead<4>(row); break;
    case 5: emu_accumulate_x4_ahead<5>(row); break;
    case 6: emu_accumulate_x4_ahead<6>(row); break;
    case 7: emu_accumulate_x4_ahead<7>(row); break;
    case 8: emu_accumulate_x4_ahead<8>(row); break;
    // The host sends wider routes to the wide kernels.
    default: __trap();
    }
}

template <typename P> __device__ __forceinline__ void emu_accumulate_wider(const EmuRow<ELEM, P>& row, int nmod)
{
    switch (nmod) {
    case 9: emu_accumulate_x4_ahead<9>(row); break;
    case 10: emu_accumulate_x4_ahead<10>(row); break;
    case 11: emu_accumulate_x4_ahead<11>(row); break;
    case 12: emu_accumulate_x4_ahead<12>(row); break;
    case 13: emu_accumulate_x4_ahead<13>(row); break;
    case 14: emu_accumulate_x4_ahead<14>(row); break;
    case 15: emu_accumulate_x4_ahead<15>(row); break;
    case 16: emu_accumulate_x4_ahead<16>(row); break;
    // The host sends narrower routes to the narrow kernels.
    default: __trap();
    }
}

extern "C" __global__ void emu_accumulate(EMU_ACCUMULATE_ARGS(int))
{
    EMU_ACCUMULATE_ROW(int)
    emu_accumulate_narrow(row, nmod);
}

extern "C" __global__ void emu_accumulate_wide(EMU_ACCUMULATE_ARGS(int))
{
    EMU_ACCUMULATE_ROW(int)
    emu_accumulate_wider(row, nmod);
}

// The same from residue planes (bytes), as the own INT8 kernel writes them.
extern "C" __global__ void emu_accumulate_r8(EMU_ACCUMULATE_ARGS(signed char))
{
    EMU_ACCUMULATE_ROW(signed char)
    emu_accumulate_narrow(row, nmod);
}

extern "C" __global__ void emu_accumulate_wide_r8(EMU_ACCUMULATE_ARGS(signed char))
{
    EMU_ACCUMULATE_ROW(signed char)
    emu_accumulate_wider(row, nmod);
}

// The listed elements of C natively: alpha * sum_p a_ip b_pj (in f64) +
// beta*C, one warp per element. A's element (i, p) is a[i*ar + p*ac] and
// B's (p, j) is b[p*br + j*bc] (row-major operands or transposed views).
// Block 256; grid ceil(count/8).
extern "C" __global__ void emu_fixup(const unsigned long long* __restrict__ list,
                                     unsigned int count, int n, int k,
                                     const ELEM* __restrict__ a, long long ar, long long ac,
                                     const ELEM* __restrict__ b, long long br, long long bc,
                                     double alpha, double beta, ELEM* __restrict__ c,
                                     long long ldc)
{
    const unsigned int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (w >= count) return;
    const unsigned long long e = list[w];
    const long long i = (long long)(e / (unsigned long long)n), j = (long long)(e % (unsigned long long)n);
    double s = 0.0;
    for (int p = lane; p < k; p += 32)
        s += (double)a[i * ar + (long long)p * ac] * (double)b[(long long)p * br + j * bc];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        ELEM* out = c + i * ldc + j;
        double value = alpha * s;
        if (beta != 0.0) value += beta * (double)*out;
        *out = (ELEM)value;
    }
}

// ---------------------------------------------------------------------
// Complex products by Karatsuba on the residues (the twin is
// fastmm::emulation::complex): one scale per complex row of A and column
// of B, the residues of both parts and of their sum modulo each m, three
// INT8 products per modulus, and one CRT pass writing both parts.

// The statistics of `count` complex vectors from those of their real
// parts (s1, the real parts; s2, the imaginary): E the larger exponent of
// the parts that scale, the norm each part's in units of 2^E added, the
// state 2 where either part has a NaN or inf and 0 where both are zero;
// the largest norm into *top as emu_stats_rows does. One thread per
// vector.
extern "C" __global__ void emu_stats_merge(int count, const int* __restrict__ e1,
                                           const double* __restrict__ n1,
                                           const int* __restrict__ s1,
                                           const int* __restrict__ e2,
                                           const double* __restrict__ n2,
                                           const int* __restrict__ s2, int* __restrict__ exps,
                                           double* __restrict__ norms, int* __restrict__ states,
                                           unsigned long long* __restrict__ top)
{
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= count) return;
    const int a = s1[v], b = s2[v];
    const int state = (a == 2 || b == 2) ? 2 : ((a == 0 && b == 0) ? 0 : 1);
    int e = 0;
    double nu = 0.0;
    if (state == 1) {
        e = a == 1 ? (b == 1 ? max(e1[v], e2[v]) : e1[v]) : e2[v];
        if (a == 1) nu = emu_scale(n1[v], e1[v] - e);
        if (b == 1) nu = __dadd_rn(nu, emu_scale(n2[v], e2[v] - e));
        atomicMax(top, (unsigned long long)__double_as_longlong(nu));
    }
    exps[v] = e;
    norms[v] = nu;
    states[v] = state;
}

// out = x + y modulo m_l in the balanced range, byte by byte, for the
// planes l < nmod (plane l of each `plane` words after plane l - 1), each
// of `words` words: the residues of the sum of two scaled parts from
// theirs. Block 256, grid (ceil(words/256), nmod).
extern "C" __global__ void emu_add_residues(long long words, long long plane,
                                            const unsigned int* __restrict__ x,
                                            const unsigned int* __restrict__ y,
                                            unsigned int* __restrict__ out)
{
    const long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= words) return;
    const int l = blockIdx.y;
    const int m = emu_modulus(l), lo = -(m / 2), hi = m - m / 2 - 1;
    const long long at = l * plane + w;
    const unsigned int xw = x[at], yw = y[at];
    unsigned int word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        int s = (int)(signed char)(xw >> (8 * i)) + (int)(signed char)(yw >> (8 * i));
        if (s > hi) s -= m;
        else if (s < lo) s += m;
        word |= ((unsigned int)s & 0xffu) << (8 * i);
    }
    out[at] = word;
}

// One complex element (row i, column j) from its three INT32 products per
// modulus (P1 = Ar*Br at planes[l*plane], P2 = Ai*Bi `part` entries on,
// P3 = (Ar+Ai)(Br+Bi) 2*part on): Re = P1 - P2 (|.| <= 2^30 for depths up
// to 2^15) and Im = P3 - P1 - P2 reduced modulo m, one CRT each, scaled
// back; cr = Re + beta*cr, ci = Im + beta*ci (beta = 0 never reads C). An element
// whose need exceeds `bits` goes to the fix-up list instead.
template <int N, typename T>
__device__ __forceinline__ void emu_complex_one(const int* __restrict__ planes, long long plane,
                                                long long part, int bits, int need, int e,
                                                double beta, T* __restrict__ cr,
                                                T* __restrict__ ci, unsigned long long index,
                                                unsigned int* __restrict__ fix_count,
                                                unsigned long long* __restrict__ fix_list,
                                                unsigned int fix_cap)
{
    if (need > bits) {
        const unsigned int slot = atomicAdd(fix_count, 1u);
        if (slot < fix_cap) fix_list[slot] = index;
        return;
    }
    int re[N], im[N];
#pragma unroll
    for (int l = 0; l < N; ++l) {
        const int p1 = planes[l * plane], p2 = planes[part + l * plane],
                  p3 = planes[2 * part + l * plane];
        re[l] = p1 - p2;
        im[l] = (int)(((long long)p3 - p1 - p2) % emu_modulus(l));
    }
    double xr = emu_scale(emu_crt<N>(re), e), xi = emu_scale(emu_crt<N>(im), e);
    if (beta != 0.0) {
        xr = __dadd_rn(xr, __dmul_rn(beta, (double)*cr));
        xi = __dadd_rn(xi, __dmul_rn(beta, (double)*ci));
    }
    *cr = (T)xr;
    *ci = (T)xi;
}

// Rows i0..i0+rows of complex C (parts cr and ci, ld ldc) from the
// products of emu_complex_one (rows x n with ld ldp), the needs and the
// exponents, and beta times C's old value (beta = 0 never reads it). Block 256, each thread 4
// elements 256 apart: grid (ceil(n/1024), rows).
extern "C" __global__ void emu_accumulate_complex(int i0, int n, const int* __restrict__ planes,
                                                  long long plane, long long part, long long ldp,
                                                  int nmod, int bits,
                                                  const unsigned char* __restrict__ need,
                                                  const int* __restrict__ row_exps,
                                                  const int* __restrict__ col_exps, double beta,
                                                  ELEM* __restrict__ cr, ELEM* __restrict__ ci,
                                                  long long ldc,
                                                  unsigned int* __restrict__ fix_count,
                                                  unsigned long long* __restrict__ fix_list,
                                                  unsigned int fix_cap)
{
    const int r = blockIdx.y, i = i0 + r;
    const int row_e = row_exps[i];
#pragma unroll 1
    for (int q = 0; q < 4; ++q) {
        const int j = blockIdx.x * 1024 + q * 256 + threadIdx.x;
        if (j >= n) return;
        const int* at = planes + (long long)r * ldp + j;
        const int nd = need[(long long)i * n + j];
        const int e = row_e + col_exps[j] + 2 - 2 * bits;
        ELEM* re = cr + (long long)i * ldc + j;
        ELEM* im = ci + (long long)i * ldc + j;
        const unsigned long long index = (unsigned long long)((long long)i * n + j);
#define EMU_COMPLEX(N)                                                                         \
    case N:                                                                                    \
        emu_complex_one<N, ELEM>(at, plane, part, bits, nd, e, beta, re, im, index, fix_count, \
                                 fix_list, fix_cap);                                           \
        break;
        switch (nmod) {
            EMU_COMPLEX(1) EMU_COMPLEX(2) EMU_COMPLEX(3) EMU_COMPLEX(4)
            EMU_COMPLEX(5) EMU_COMPLEX(6) EMU_COMPLEX(7) EMU_COMPLEX(8)
            EMU_COMPLEX(9) EMU_COMPLEX(10) EMU_COMPLEX(11) EMU_COMPLEX(12)
            EMU_COMPLEX(13) EMU_COMPLEX(14) EMU_COMPLEX(15) EMU_COMPLEX(16)
        default: __trap();
        }
#undef EMU_COMPLEX
    }
}
