#include "cheap.h"

#include <stdlib.h> /* defines __GLIBC__ on glibc */
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
