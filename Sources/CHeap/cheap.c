#include "cheap.h"

#include <stdio.h>
#include <stdlib.h> /* defines __GLIBC__ on glibc */
#include <time.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

int cheap_trim(size_t pad) {
#if defined(__GLIBC__)
    return malloc_trim(pad);
#else
    (void)pad;
    return 0;
#endif
}

int cheap_heap_usage(long long *in_use, long long *free_bytes) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    *in_use = (long long)(info.uordblks + info.hblkhd);
    *free_bytes = (long long)info.fordblks;
    return 0;
#else
    (void)in_use;
    (void)free_bytes;
    return -1;
#endif
}

long long cheap_resident_bytes(void) {
    FILE *file = fopen("/proc/self/statm", "r");
    if (file == NULL) {
        return -1;
    }
    long long size = 0, resident = 0;
    int fields = fscanf(file, "%lld %lld", &size, &resident);
    fclose(file);
    long page = sysconf(_SC_PAGESIZE);
    return fields == 2 && page > 0 ? resident * page : -1;
}

long long cheap_cpu_nanoseconds(void) {
    struct timespec used;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used) != 0) {
        return -1;
    }
    return (long long)used.tv_sec * 1000000000LL + used.tv_nsec;
}
