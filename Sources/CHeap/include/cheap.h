#ifndef CHEAP_H
#define CHEAP_H

#include <stddef.h>

/// Gives the allocator's free pages back to the system (glibc's `malloc_trim`, which is declared in <malloc.h>,
/// a header Swift's Glibc module does not import). Returns 1 when memory was released, 0 when none was or when
/// the C library has no such call.
int cheap_trim(size_t pad);

#endif
