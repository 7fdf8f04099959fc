/* The floor under Benchmarks/results/push.md: libcurl alone (no relay) posting N
   APNs-shaped requests over one HTTP/2 connection, M in flight, easy handles reused.
   gcc -O2 -o /tmp/push-floor Benchmarks/push-floor.c -lcurl
   push-floor https://localhost:PORT CA.pem TOKENS.txt N M   (TOKENS.txt: one path tail a line) */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static size_t sink(char *p, size_t s, size_t n, void *u) { (void)p; (void)u; return s * n; }
int main(int argc, char **argv) {
  const char *base = argv[1], *ca = argv[2], *list = argv[3]; int total = atoi(argv[4]), par = atoi(argv[5]);
  char (*paths)[80] = malloc(sizeof(*paths) * total); FILE *f = fopen(list, "r");
  for (int i = 0; i < total && fgets(paths[i], 80, f); i++) paths[i][strcspn(paths[i], "\n")] = 0;
  const char *body = "{\"relay\":{\"type\":\"call.incoming\",\"callId\":\"c0000000000000000000000000000000\",\"from\":{\"uid\":\"caller1\"},\"callType\":\"audio\"}}";
  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM *m = curl_multi_init();
  curl_multi_setopt(m, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
  curl_multi_setopt(m, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)par);
  CURL **spare = malloc(sizeof(CURL *) * par); int nspare = 0, next = 0, done = 0, running = 0;
  struct curl_slist **lists = calloc(total, sizeof(*lists));
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  while (done < total) {
    while (next < total && next - done < par) {
      CURL *e = nspare ? spare[--nspare] : curl_easy_init();
      char url[200]; snprintf(url, sizeof url, "%s/3/device/%s", base, paths[next]);
      struct curl_slist *h = NULL;
      h = curl_slist_append(h, "authorization: bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQyJ9.eyJpc3MiOiJURUFNIiwiaWF0IjoxNzAwMDAwMDAwfQ.sig");
      h = curl_slist_append(h, "apns-push-type: voip"); h = curl_slist_append(h, "apns-topic: x.voip");
      h = curl_slist_append(h, "apns-priority: 10"); h = curl_slist_append(h, "apns-expiration: 1800000000");
      h = curl_slist_append(h, "apns-collapse-id: c0000000000000000000000000000000");
      h = curl_slist_append(h, "content-type: application/json"); h = curl_slist_append(h, "Expect:");
      lists[next] = h;
      curl_easy_setopt(e, CURLOPT_URL, url); curl_easy_setopt(e, CURLOPT_CAINFO, ca); curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
      curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS); curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, h); curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
      curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink); curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)(long)next);
      curl_multi_add_handle(m, e); next++;
    }
    curl_multi_perform(m, &running);
    int left; CURLMsg *msg;
    while ((msg = curl_multi_info_read(m, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL *e = msg->easy_handle; long st = 0; void *p; curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
      curl_easy_getinfo(e, CURLINFO_PRIVATE, &p);
      if (msg->data.result != CURLE_OK || st != 200) { fprintf(stderr, "fail %d %ld\n", msg->data.result, st); return 1; }
      curl_multi_remove_handle(m, e); curl_slist_free_all(lists[(long)p]); curl_easy_reset(e); spare[nspare++] = e; done++;
    }
    if (done < total) curl_multi_poll(m, NULL, 0, 100, NULL);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("%d requests in %.3f s: %.0f/s\n", total, s, total / s);
  return 0;
}
