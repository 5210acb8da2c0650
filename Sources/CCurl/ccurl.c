#include "ccurl.h"
#include <ctype.h>
#include <string.h>
#include <strings.h>

CURLcode ccurl_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode ccurl_setopt_postfields(CURL *handle, const char *data, long length) {
    CURLcode rc = curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE, length);
    if (rc != CURLE_OK) return rc;
    return curl_easy_setopt(handle, CURLOPT_POSTFIELDS, data);
}

CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static size_t ccurl_header(char *buffer, size_t size, size_t count, void *userdata) {
    ccurl_response *response = (ccurl_response *)userdata;
    size_t length = size * count;
    static const char name[] = "retry-after:";
    size_t name_length = sizeof(name) - 1;
    if (length > name_length && strncasecmp(buffer, name, name_length) == 0) {
        size_t start = name_length;
        while (start < length && isspace((unsigned char)buffer[start])) start++;
        size_t end = length;
        while (end > start && isspace((unsigned char)buffer[end - 1])) end--;
        size_t n = end - start;
        if (n >= sizeof(response->retry_after)) n = sizeof(response->retry_after) - 1;
        memcpy(response->retry_after, buffer + start, n);
        response->retry_after[n] = 0;
    }
    return length;
}

static size_t ccurl_body(char *buffer, size_t size, size_t count, void *userdata) {
    (void)buffer;
    ccurl_response *response = (ccurl_response *)userdata;
    size_t length = size * count;
    response->body_bytes += length;
    if (response->max_body > 0 && response->body_bytes > response->max_body) return 0; /* stop reading */
    return length;
}

CURLcode ccurl_capture_response(CURL *handle, ccurl_response *response) {
    CURLcode rc = curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, ccurl_header);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_HEADERDATA, (void *)response);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, ccurl_body);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_WRITEDATA, (void *)response);
    return rc;
}
