// Counts heap allocations of the process it is preloaded into (LD_PRELOAD), for scripts/bench's allocations
// per request. On SIGUSR2 it writes the count so far, as decimal text, over the file named by MALLOC_COUNT_FILE.
// Built by scripts/bench with: cc -O2 -shared -fPIC -o malloc-count.so malloc-count.c -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_ulong allocations;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

// dlsym itself may call calloc before real_calloc is known: serve that from a static buffer.
static char early[4096];
static size_t early_used;

static void report(int signal) {
    (void)signal;
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (!path) return;
    char text[32];
    int n = 0;
    unsigned long value = atomic_load(&allocations);
    char digits[32];
    do { digits[n++] = '0' + value % 10; value /= 10; } while (value);
    for (int i = 0; i < n; i++) text[i] = digits[n - 1 - i];
    text[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    ssize_t written = write(fd, text, n);
    (void)written;
    close(fd);
}

__attribute__((constructor)) static void start(void) {
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    struct sigaction action = {0};
    action.sa_handler = report;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &action, NULL);
}

void *malloc(size_t size) {
    if (!real_malloc) real_malloc = dlsym(RTLD_NEXT, "malloc");
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return real_malloc(size);
}

void *calloc(size_t count, size_t size) {
    if (!real_calloc) {
        size_t bytes = (count * size + 15) & ~(size_t)15;
        if (early_used + bytes > sizeof early) return NULL;
        void *p = early + early_used;
        early_used += bytes;
        return p;
    }
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return real_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    if (!real_realloc) real_realloc = dlsym(RTLD_NEXT, "realloc");
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return real_realloc(pointer, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (!real_posix_memalign) real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return real_posix_memalign(out, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    if (!real_aligned_alloc) real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return real_aligned_alloc(alignment, size);
}

void free(void *pointer) {
    static void (*real_free)(void *);
    if ((char *)pointer >= early && (char *)pointer < early + sizeof early) return;
    if (!real_free) real_free = dlsym(RTLD_NEXT, "free");
    real_free(pointer);
}
