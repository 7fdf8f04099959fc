// libcurl's setopt/getinfo entry points are variadic, which Swift cannot call: one
// typed inline wrapper per argument kind (curl/curl.h documents each option's type).
#include <curl/curl.h>

typedef size_t (*relay_curl_data_cb)(char *, size_t, size_t, void *);
typedef int (*relay_curl_socket_cb)(CURL *, curl_socket_t, int, void *, void *);
typedef int (*relay_curl_timer_cb)(CURLM *, long, void *);
typedef CURLcode (*relay_curl_ssl_ctx_cb)(CURL *, void *, void *);

static inline CURLcode relay_curl_easy_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode relay_curl_easy_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode relay_curl_easy_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode relay_curl_easy_data_cb(CURL *h, CURLoption o, relay_curl_data_cb v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode relay_curl_easy_ssl_ctx_cb(CURL *h, relay_curl_ssl_ctx_cb v) {
  return curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, v);
}

static inline CURLMcode relay_curl_multi_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode relay_curl_multi_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode relay_curl_multi_socket_cb(CURLM *m, relay_curl_socket_cb v) {
  return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v);
}
static inline CURLMcode relay_curl_multi_timer_cb(CURLM *m, relay_curl_timer_cb v) {
  return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v);
}

static inline CURLcode relay_curl_info_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode relay_curl_info_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }

/// The result of a finished transfer (`CURLMSG_DONE`): `data` is a union.
static inline CURLcode relay_curl_msg_result(const CURLMsg *m) { return m->data.result; }
