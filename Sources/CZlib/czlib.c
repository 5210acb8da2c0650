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
