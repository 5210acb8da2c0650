#ifndef CHEAP_H
#define CHEAP_H

#include <stddef.h>

/// Gives the allocator's free pages back to the system (glibc's `malloc_trim`, which is declared in <malloc.h>,
/// a header Swift's Glibc module does not import). Returns 1 when memory was released, 0 when none was or when
/// the C library has no such call.
int cheap_trim(size_t pad);

/// This process's resident set in bytes, from `/proc/self/statm`; -1 where there is no such file.
long long cheap_resident_bytes(void);

/// The CPU time all of this process's threads have used, in nanoseconds; -1 where the clock is missing.
long long cheap_cpu_nanoseconds(void);

/// What the allocator holds (glibc's `mallinfo2`): bytes handed out and not yet freed (`in_use`, the mapped large
/// blocks included) and bytes free inside its arenas (`free_bytes`, resident or not). Walks every arena's free
/// lists under its lock, so it is for a quiet process. Returns 0, or -1 where the C library cannot tell.
int cheap_heap_usage(long long *in_use, long long *free_bytes);

#endif
