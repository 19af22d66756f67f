/* The precise profile's control (`bench local --precise`, mode bind-slow5): preloaded into
 * every rank, it makes every wall clock the process reads (clock_gettime of a wall clock,
 * gettimeofday: MPI_Wtime, Fortran's system_clock) run CLIMSTACK_SLOWDOWN (e.g. 0.05)
 * fast from the process's first read on, so every interval the benchmark measures is
 * exactly (1 + share) times what it took: a known effect, with the run's own noise. A
 * busy-wait in the ranks cannot be that exact: a wait one rank inserts also stalls the
 * ranks that wait for it, and the waits' own clock reads cost as much as a short
 * message's share (measured: 10-20% for a "5%" spin in OSU latency). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#define CLOCKS 16 /* clock ids below this are dilated (the wall clocks are 0-7) */

typedef int (*clock_fn)(clockid_t, struct timespec *);
static clock_fn real_clock;
static double share;
static struct timespec base[CLOCKS]; /* each clock's first reading */

static void init(void) {
    if (real_clock)
        return;
    real_clock = (clock_fn)dlsym(RTLD_NEXT, "clock_gettime");
    const char *given = getenv("CLIMSTACK_SLOWDOWN");
    share = given ? strtod(given, NULL) : 0.0;
}

__attribute__((constructor)) static void loaded(void) { init(); }

static int wall(clockid_t id) {
    return id == CLOCK_REALTIME || id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW ||
           id == CLOCK_REALTIME_COARSE || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_BOOTTIME;
}

/* base + (t - base) * (1 + share), in whole nanoseconds */
static void dilate(clockid_t id, struct timespec *t) {
    struct timespec *from = &base[id];
    if (!from->tv_sec && !from->tv_nsec) {
        *from = *t;
        return;
    }
    long long ns = (t->tv_sec - from->tv_sec) * 1000000000LL + (t->tv_nsec - from->tv_nsec);
    ns += (long long)(ns * share);
    t->tv_sec = from->tv_sec + (from->tv_nsec + ns) / 1000000000LL;
    t->tv_nsec = (from->tv_nsec + ns) % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *tp) {
    init();
    int status = real_clock(id, tp);
    if (!status && share > 0 && wall(id))
        dilate(id, tp);
    return status;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec t;
    (void)tz;
    clock_gettime(CLOCK_REALTIME, &t);
    tv->tv_sec = t.tv_sec;
    tv->tv_usec = t.tv_nsec / 1000;
    return 0;
}
