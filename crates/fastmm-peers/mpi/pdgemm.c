/*
 * The ScaLAPACK peer of fastmm's MPI product: C = A·B (f64, m×k times
 * k×n) with pdgemm over the ranks of one mpirun, on a pr×pc process grid
 * in 2-D block-cyclic layout (blocks nb×nb), timed from a barrier before
 * the call to a barrier after it (so the slowest rank's time), median of
 * REPS after one untimed call. Each rank fills its local blocks itself
 * from a hash of the global indices (uniform in [-1, 1)), so no input
 * moves between ranks; the bytes a monitoring MPI reports are pdgemm's.
 *
 *   mpicc -O2 -o pdgemm pdgemm.c -lscalapack-openmpi -lblas -lm
 *   mpirun -np P ./pdgemm M K N REPS [NB [PR PC]]
 *
 * Without PR PC the grid is the factorisation of P with the fewest words
 * received per rank by pdgemm's C-stationary algorithm (A's row blocks
 * along process rows, B's column blocks along process columns), the
 * squarer one on ties: the best grid a user could give it.
 *
 * The result is checked by three more pdgemm calls with one column: for
 * a random x, C·x against A·(B·x), relative to max|A·(B·x)|.
 *
 * Prints one line: pdgemm m=… k=… n=… P=… grid=PRxPC nb=… median_ms=…
 * gflops=… words_model=… rel_err=… and exits non-zero if the check fails.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void Cblacs_pinfo(int *me, int *procs);
void Cblacs_get(int context, int what, int *value);
void Cblacs_gridinit(int *context, const char *order, int rows, int cols);
void Cblacs_gridinfo(int context, int *rows, int *cols, int *row, int *col);
void Cblacs_gridexit(int context);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
               const int *irsrc, const int *icsrc, const int *ctxt, const int *lld, int *info);
void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);

/* Uniform in [-1, 1) from a global index and a stream (splitmix64). */
static double entry(uint64_t stream, uint64_t i, uint64_t j) {
    uint64_t z = stream * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + j + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

/* Words one rank receives for C = A·B on a pr×pc grid, C stationary. */
static double words_model(double m, double k, double n, int pr, int pc) {
    return m / pr * k * (1.0 - 1.0 / pc) + k * n / pc * (1.0 - 1.0 / pr);
}

/* A distributed rows×cols matrix of the grid. */
struct dist {
    int desc[9];
    int lrows, lcols;
    double *data;
};

static int make(struct dist *d, int rows, int cols, int nb, int ctxt, int pr, int pc, int myr,
                int myc) {
    int zero = 0, info = 0;
    int cnb = cols == 1 ? 1 : nb;
    d->lrows = numroc_(&rows, &nb, &myr, &zero, &pr);
    d->lcols = numroc_(&cols, &cnb, &myc, &zero, &pc);
    int lld = d->lrows > 1 ? d->lrows : 1;
    descinit_(d->desc, &rows, &cols, &nb, &cnb, &zero, &zero, &ctxt, &lld, &info);
    size_t len = (size_t)lld * (size_t)(d->lcols > 0 ? d->lcols : 1);
    d->data = calloc(len, sizeof(double));
    return info != 0 || d->data == NULL;
}

/* Fills d with stream `s`: local (li, lj) is global (gi, gj) of the
 * block-cyclic layout. */
static void fill(struct dist *d, uint64_t s, int nb, int cnb, int pr, int pc, int myr, int myc) {
    int lld = d->lrows > 1 ? d->lrows : 1;
    for (int lj = 0; lj < d->lcols; lj++) {
        long gj = ((long)(lj / cnb) * pc + myc) * cnb + lj % cnb;
        for (int li = 0; li < d->lrows; li++) {
            long gi = ((long)(li / nb) * pr + myr) * nb + li % nb;
            d->data[(size_t)lj * lld + li] = entry(s, (uint64_t)gi, (uint64_t)gj);
        }
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, procs;
    Cblacs_pinfo(&me, &procs);
    if (argc < 5) {
        if (me == 0) fprintf(stderr, "usage: pdgemm M K N REPS [NB [PR PC]]\n");
        MPI_Finalize();
        return 2;
    }
    int m = atoi(argv[1]), k = atoi(argv[2]), n = atoi(argv[3]), reps = atoi(argv[4]);
    int nb = argc > 5 ? atoi(argv[5]) : 128;
    int pr = 0, pc = 0;
    if (argc > 7) {
        pr = atoi(argv[6]);
        pc = atoi(argv[7]);
    } else {
        double best = INFINITY;
        for (int r = 1; r <= procs; r++) {
            if (procs % r) continue;
            int c = procs / r;
            double w = words_model(m, k, n, r, c);
            int squarer = abs(r - c) < abs(pr - pc);
            if (w < best * (1 - 1e-12) || (w <= best * (1 + 1e-12) && squarer)) {
                best = w;
                pr = r;
                pc = c;
            }
        }
    }
    if (m < 1 || k < 1 || n < 1 || reps < 1 || nb < 1 || pr * pc != procs) {
        if (me == 0) fprintf(stderr, "pdgemm: bad arguments (grid %dx%d for %d ranks)\n", pr, pc, procs);
        MPI_Finalize();
        return 2;
    }
    int ctxt, myr, myc;
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", pr, pc);
    Cblacs_gridinfo(ctxt, &pr, &pc, &myr, &myc);

    struct dist a, b, c, x, y, z, w;
    int bad = make(&a, m, k, nb, ctxt, pr, pc, myr, myc) | make(&b, k, n, nb, ctxt, pr, pc, myr, myc) |
              make(&c, m, n, nb, ctxt, pr, pc, myr, myc) | make(&x, n, 1, nb, ctxt, pr, pc, myr, myc) |
              make(&y, k, 1, nb, ctxt, pr, pc, myr, myc) | make(&z, m, 1, nb, ctxt, pr, pc, myr, myc) |
              make(&w, m, 1, nb, ctxt, pr, pc, myr, myc);
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        if (me == 0) fprintf(stderr, "pdgemm: descriptor or allocation failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill(&a, 1, nb, nb, pr, pc, myr, myc);
    fill(&b, 2, nb, nb, pr, pc, myr, myc);
    fill(&x, 3, nb, 1, pr, pc, myr, myc);

    const int one = 1, ncol = 1;
    const double alpha = 1.0, beta = 0.0;
    double *times = malloc(sizeof(double) * reps);
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdgemm_("N", "N", &m, &n, &k, &alpha, a.data, &one, &one, a.desc, b.data, &one, &one, b.desc,
                &beta, c.data, &one, &one, c.desc);
        MPI_Barrier(MPI_COMM_WORLD);
        if (r >= 0) times[r] = MPI_Wtime() - t0;
    }
    qsort(times, reps, sizeof(double), cmp);
    double median = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);

    /* y = B·x, z = A·y, w = C·x; the vectors live in process column 0. */
    pdgemm_("N", "N", &k, &ncol, &n, &alpha, b.data, &one, &one, b.desc, x.data, &one, &one, x.desc,
            &beta, y.data, &one, &one, y.desc);
    pdgemm_("N", "N", &m, &ncol, &k, &alpha, a.data, &one, &one, a.desc, y.data, &one, &one, y.desc,
            &beta, z.data, &one, &one, z.desc);
    pdgemm_("N", "N", &m, &ncol, &n, &alpha, c.data, &one, &one, c.desc, x.data, &one, &one, x.desc,
            &beta, w.data, &one, &one, w.desc);
    double local[2] = {0.0, 0.0}, global[2];
    for (int i = 0; i < (z.lcols > 0 ? z.lrows : 0); i++) {
        double d = fabs(w.data[i] - z.data[i]);
        if (!(d <= local[0])) local[0] = d; /* NaN propagates */
        if (fabs(z.data[i]) > local[1]) local[1] = fabs(z.data[i]);
    }
    MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double rel = global[0] / (global[1] > 0 ? global[1] : 1.0);
    /* Far above rounding (about k·2^-53 relative), far below a wrong product. */
    int ok = rel <= 1e-9;
    if (me == 0) {
        printf("pdgemm m=%d k=%d n=%d P=%d grid=%dx%d nb=%d median_ms=%.3f gflops=%.2f "
               "words_model=%.0f rel_err=%.3g %s\n",
               m, k, n, procs, pr, pc, nb, median * 1e3, 2.0 * m * k * (double)n / median / 1e9,
               words_model(m, k, n, pr, pc), rel, ok ? "ok" : "FAILED");
    }
    free(times);
    Cblacs_gridexit(ctxt);
    MPI_Finalize();
    return ok ? 0 : 1;
}
