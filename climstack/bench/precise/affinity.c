/* The precise profile's pinning probe (`bench local --precise`, every mode): preloaded into
 * each rank, it writes $CLIMSTACK_AFFINITY_LOG/<pid> when the process starts: its rank
 * (PMI_RANK), the CPUs it may run on (sched_getaffinity) and its executable. The pinning
 * is thus read from inside the run, natively and in every container alike. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void record(void) {
    const char *dir = getenv("CLIMSTACK_AFFINITY_LOG"), *rank = getenv("PMI_RANK");
    char path[PATH_MAX], exe[PATH_MAX] = "?", line[PATH_MAX + 4096];
    cpu_set_t set;
    if (!dir || sched_getaffinity(0, sizeof set, &set))
        return;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 1] = '\0';
    int at = snprintf(line, sizeof line, "rank=%s cpus=", rank ? rank : "?");
    for (int cpu = 0, first = 1; cpu < CPU_SETSIZE && at < (int)sizeof line - 64; cpu++)
        if (CPU_ISSET(cpu, &set)) {
            at += snprintf(line + at, sizeof line - at, first ? "%d" : ",%d", cpu);
            first = 0;
        }
    at += snprintf(line + at, sizeof line - at, " exe=%s\n", exe);
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        (void)!write(fd, line, at);
        close(fd);
    }
}
