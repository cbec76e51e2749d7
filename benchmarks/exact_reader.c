/* benchmarks/trace_exact.py ground truth: N 4 KiB reads (pread, or read) of a cached file on T threads, after
 * dlopen of an optional library (libcufile: the trace then sends its I/O one by one); prints its own
 * exact count of reads and bytes, and its rate, as one JSON line on stderr */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
static const char *path; static long per; static int mode;
static long got_reads[64], got_bytes[64];
static void *worker(void *a) {
    long id = (long)a; char buf[4096];
    int fd = open(path, O_RDONLY); struct stat st; fstat(fd, &st);
    long n = st.st_size / 4096, r = 0, b = 0;
    for (long i = 0; i < per; i++) {
        ssize_t k;
        if (mode == 0) k = pread(fd, buf, 4096, ((i + id * 7) % n) * 4096);
        else { if (i % n == 0) lseek(fd, 0, SEEK_SET); k = read(fd, buf, 4096); }
        r++; if (k > 0) b += k;
    }
    got_reads[id] = r; got_bytes[id] = b; close(fd); return 0;
}
int main(int argc, char **argv) {
    path = argv[1]; long total = atol(argv[2]); int T = argc > 3 ? atoi(argv[3]) : 1;
    mode = argc > 4 && !strcmp(argv[4], "read");
    if (argc > 5 && *argv[5] && !dlopen(argv[5], RTLD_NOW)) { fprintf(stderr, "dlopen: %s\n", dlerror()); }
    per = total / T; pthread_t th[64]; struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < T; i++) pthread_create(&th[i], 0, worker, (void *)i);
    long R = 0, B = 0;
    for (long i = 0; i < T; i++) { pthread_join(th[i], 0); R += got_reads[i]; B += got_bytes[i]; }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "{\"truth_reads\": %ld, \"truth_bytes\": %ld, \"seconds\": %.3f, \"reads_per_s\": %.0f}\n", R, B, dt, R / dt);
    return 0;
}
