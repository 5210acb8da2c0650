#include "ccurl.h"
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <idn2.h>
#include <stdlib.h>

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

/* A host in ASCII: as given when it is ASCII already, else its IDNA form by libidn2 from UTF-8 (libcurl 7.88
 * converts from the locale's charset, which fails in a process that never set one). Flags as libcurl's: UTS #46
 * non-transitional, then transitional for IDNA 2003 names. NULL when it cannot be converted. */
static char *ccurl_ascii_host(const char *host) {
    int ascii = 1;
    for (const unsigned char *c = (const unsigned char *)host; *c; c++) if (*c >= 0x80) ascii = 0;
    if (ascii) return strdup(host);
    char *out = NULL;
    int rc = idn2_lookup_u8((const uint8_t *)host, (uint8_t **)&out, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
    if (rc != IDN2_OK) rc = idn2_lookup_u8((const uint8_t *)host, (uint8_t **)&out, IDN2_TRANSITIONAL);
    if (rc != IDN2_OK) return NULL;
    char *copy = strdup(out);
    idn2_free(out);
    return copy;
}

CURLUcode ccurl_url_parse(const char *url, ccurl_url_parts *parts) {
    memset(parts, 0, sizeof(*parts));
    CURLU *handle = curl_url();
    if (!handle) return CURLUE_OUT_OF_MEMORY;
    char *raw_host = NULL;
    CURLUcode rc = curl_url_set(handle, CURLUPART_URL, url, 0);
    if (rc == CURLUE_OK) {
        char *part = NULL;
        if (curl_url_get(handle, CURLUPART_USER, &part, 0) == CURLUE_OK) { parts->has_userinfo_or_zone = 1; curl_free(part); part = NULL; }
        if (curl_url_get(handle, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK) { parts->has_userinfo_or_zone = 1; curl_free(part); part = NULL; }
        if (curl_url_get(handle, CURLUPART_ZONEID, &part, 0) == CURLUE_OK) { parts->has_userinfo_or_zone = 1; curl_free(part); }
    }
    if (rc == CURLUE_OK) rc = curl_url_get(handle, CURLUPART_HOST, &raw_host, 0);
    if (rc == CURLUE_OK) {
        char *ascii = ccurl_ascii_host(raw_host);
        if (!ascii) rc = CURLUE_MALFORMED_INPUT;
        else {
            rc = curl_url_set(handle, CURLUPART_HOST, ascii, 0);
            free(ascii);
        }
    }
    curl_free(raw_host);
    if (rc == CURLUE_OK) rc = curl_url_get(handle, CURLUPART_SCHEME, &parts->scheme, 0);
    if (rc == CURLUE_OK) rc = curl_url_get(handle, CURLUPART_HOST, &parts->host, 0);
    if (rc == CURLUE_OK) rc = curl_url_get(handle, CURLUPART_PORT, &parts->port, CURLU_DEFAULT_PORT);
    if (rc == CURLUE_OK) rc = curl_url_get(handle, CURLUPART_URL, &parts->url, 0);
    curl_url_cleanup(handle);
    if (rc != CURLUE_OK) ccurl_url_parts_free(parts);
    return rc;
}

void ccurl_url_parts_free(ccurl_url_parts *parts) {
    curl_free(parts->url);
    curl_free(parts->scheme);
    curl_free(parts->host);
    curl_free(parts->port);
    memset(parts, 0, sizeof(*parts));
}

int ccurl_pin_init(ccurl_pin *pin, const char *address) {
    memset(pin, 0, sizeof(*pin));
    if (inet_pton(AF_INET, address, pin->address) == 1) { pin->family = AF_INET; return 0; }
    if (inet_pton(AF_INET6, address, pin->address) == 1) { pin->family = AF_INET6; return 0; }
    return -1;
}

static curl_socket_t ccurl_open_pinned(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    ccurl_pin *pin = (ccurl_pin *)clientp;
    int same = 0;
    if (purpose == CURLSOCKTYPE_IPCXN && address->family == pin->family) {
        if (pin->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
            const struct sockaddr_in *sin = (const struct sockaddr_in *)&address->addr;
            same = memcmp(&sin->sin_addr, pin->address, 4) == 0;
        } else if (pin->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
            const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&address->addr;
            same = memcmp(&sin6->sin6_addr, pin->address, 16) == 0;
        }
    }
    if (!same) {
        pin->refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
}

CURLcode ccurl_pin_sockets(CURL *handle, ccurl_pin *pin) {
    CURLcode rc = curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, ccurl_open_pinned);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, (void *)pin);
    return rc;
}
