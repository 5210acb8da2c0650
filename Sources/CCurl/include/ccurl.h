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

/// A URL as libcurl itself parses it, its host in ASCII (IDNA, by libidn2 as libcurl would convert it), so that
/// libcurl is handed a URL it needs to convert nothing in. Free with `ccurl_url_parts_free`.
typedef struct {
    char *url;
    char *scheme;
    char *host;
    char *port;
    int has_userinfo_or_zone;
} ccurl_url_parts;

/// Parses `url` into `parts`; CURLUE_OK on success. On failure nothing needs freeing.
CURLUcode ccurl_url_parse(const char *url, ccurl_url_parts *parts);
/// Frees what `ccurl_url_parse` filled in.
void ccurl_url_parts_free(ccurl_url_parts *parts);

/// The only address a transfer may open a socket to: the one the SSRF guard checked. A socket to any other
/// address is refused (and `refused` set), whatever libcurl resolved, so a second resolution cannot move it.
typedef struct {
    int family;
    unsigned char address[16];
    int refused;
} ccurl_pin;

/// Fills `pin` from a textual IPv4 or IPv6 address; 0 on success, -1 if it is not one.
int ccurl_pin_init(ccurl_pin *pin, const char *address);
/// Installs the socket-open check for `pin` on `handle`.
CURLcode ccurl_pin_sockets(CURL *handle, ccurl_pin *pin);

#endif
