#ifndef CWRITEBACK_H
#define CWRITEBACK_H

/// Starts the kernel's writeback of every dirty page of the open file `fd` and returns without waiting for it
/// (Linux's `sync_file_range` with `SYNC_FILE_RANGE_WRITE`, which needs `_GNU_SOURCE`, so Swift's Glibc module does
/// not import it). It makes nothing durable: the caller's fsync still does. Returns 0, or -1 with `errno` set;
/// where the call does not exist it does nothing and returns 0.
int cwriteback_start(int fd);

#endif
