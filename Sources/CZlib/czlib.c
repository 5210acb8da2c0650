#include "czlib.h"
#include <limits.h>
#include <string.h>
#include <zlib.h>

czlib_gunzip_result czlib_gunzip(const unsigned char *in, size_t in_length, unsigned char *out, size_t out_capacity,
                                 size_t *out_length) {
    *out_length = 0;
    if (in_length > UINT_MAX || out_capacity > UINT_MAX) return CZLIB_GUNZIP_TOO_LARGE;
    z_stream stream;
    memset(&stream, 0, sizeof(stream));
    /* 16 + MAX_WBITS: a gzip header and trailer, not zlib's or none. */
    if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return CZLIB_GUNZIP_CORRUPT;
    stream.next_in = (Bytef *)in;
    stream.avail_in = (uInt)in_length;
    stream.next_out = out;
    stream.avail_out = (uInt)out_capacity;
    int rc = inflate(&stream, Z_FINISH);
    czlib_gunzip_result result;
    switch (rc) {
    case Z_STREAM_END:
        result = stream.avail_in == 0 ? CZLIB_GUNZIP_OK : CZLIB_GUNZIP_TRAILING_BYTES;
        break;
    case Z_BUF_ERROR:
    case Z_OK:
        /* Z_FINISH stopped short: either the output is full or the input ran out first. */
        result = stream.avail_out == 0 ? CZLIB_GUNZIP_TOO_LARGE : CZLIB_GUNZIP_TRUNCATED;
        break;
    default:
        result = CZLIB_GUNZIP_CORRUPT;
        break;
    }
    *out_length = out_capacity - stream.avail_out;
    inflateEnd(&stream);
    return result;
}

uint64_t czlib_record_check(const unsigned char *seq, const unsigned char *payload, size_t payload_length) {
    uLong crc = crc32_z(crc32(0L, Z_NULL, 0), seq, 8);
    uLong adler = adler32_z(adler32(0L, Z_NULL, 0), seq, 8);
    if (payload_length > 0) {
        crc = crc32_z(crc, payload, payload_length);
        adler = adler32_z(adler, payload, payload_length);
    }
    return ((uint64_t)(adler & 0xffffffffu) << 32) | (uint64_t)(crc & 0xffffffffu);
}
