/* The round trip of one cache line between two threads pinned to CPUs 0 and
 * 1 (default) or the two given: how much a second thread's hand-off costs on
 * this machine at the moment. On a virtual machine it changes with the host's
 * placement of the vCPUs (docs/results.md, "The host's states").
 *
 *   cc -O2 scripts/vcpu_pingpong.c -o /tmp/pingpong -lpthread && /tmp/pingpong [CPU CPU]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { ROUNDS = 400000 };
static _Atomic long turn = 0;

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *answer(void *cpu) {
    if (pin(*(int *)cpu) != 0) {
        fprintf(stderr, "cannot pin to CPU %d\n", *(int *)cpu);
        exit(1);
    }
    for (long i = 1; i <= ROUNDS; i++) {
        while (atomic_load(&turn) != 2 * i - 1)
            ;
        atomic_store(&turn, 2 * i);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int first = argc > 2 ? atoi(argv[1]) : 0, second = argc > 2 ? atoi(argv[2]) : 1;
    pthread_t other;
    if (pthread_create(&other, NULL, answer, &second) != 0 || pin(first) != 0) {
        fprintf(stderr, "cannot start or pin the threads\n");
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 1; i <= ROUNDS; i++) {
        atomic_store(&turn, 2 * i - 1);
        while (atomic_load(&turn) != 2 * i)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(other, NULL);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("round trip %.1f ns (CPUs %d and %d)\n", ns / ROUNDS, first, second);
    return 0;
}
