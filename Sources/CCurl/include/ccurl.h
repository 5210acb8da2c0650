#ifndef CCURL_H
#define CCURL_H

#include <curl/curl.h>
#include <stddef.h>

/// Typed wrappers around libcurl's variadic calls, so that Swift never calls a C variadic function.

CURLcode ccurl_global_init(void);
CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode ccurl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode ccurl_setopt_postfields(CURL *handle, const char *data, long length);
CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value);

/// What the response callbacks keep: the Retry-After header and how many body bytes arrived (the body
/// itself is discarded, and reading stops after `max_body` bytes).
typedef struct {
    char retry_after[64];
    size_t body_bytes;
    size_t max_body;
} ccurl_response;

/// Installs header and body callbacks that fill `response`.
CURLcode ccurl_capture_response(CURL *handle, ccurl_response *response);

#endif
