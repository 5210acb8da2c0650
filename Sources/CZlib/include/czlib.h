#ifndef CZLIB_H
#define CZLIB_H

#include <stddef.h>
#include <stdint.h>

/// What `czlib_gunzip` found.
typedef enum {
    CZLIB_GUNZIP_OK = 0,
    /// The output would be larger than `out_capacity`.
    CZLIB_GUNZIP_TOO_LARGE = 1,
    /// Not a gzip stream, or its data or check values are wrong.
    CZLIB_GUNZIP_CORRUPT = 2,
    /// The stream ends before its last block and trailer.
    CZLIB_GUNZIP_TRUNCATED = 3,
    /// Bytes follow the end of the gzip stream.
    CZLIB_GUNZIP_TRAILING_BYTES = 4,
} czlib_gunzip_result;

/// Inflates exactly one gzip member, `in`, into `out`; `*out_length` is the number of bytes written.
czlib_gunzip_result czlib_gunzip(const unsigned char *in, size_t in_length, unsigned char *out, size_t out_capacity,
                                 size_t *out_length);

/// The commit journal's record check: zlib's CRC-32 of `seq` (8 bytes) then `payload` in the low 32 bits, and
/// their Adler-32 in the high 32 bits.
uint64_t czlib_record_check(const unsigned char *seq, const unsigned char *payload, size_t payload_length);

#endif
