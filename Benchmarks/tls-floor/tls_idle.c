/*
 * tls_idle: what OpenSSL itself holds per idle server connection, the floor for
 * Relay's wss:// memory figure (Benchmarks/tls-floor/README.md).
 *
 * In one process, N client/server SSL pairs over in-memory transports: every
 * server SSL is made first, then each pair does a full handshake and one small
 * exchange each way (an HTTP upgrade's size), then the client side is freed. The
 * figure is the heap in use (glibc mallinfo2: uordblks + hblkhd) with the N idle
 * server SSLs alive, minus the heap in use before, divided by N. All of the
 * harness's own per-connection state is allocated before the baseline, so the
 * delta is OpenSSL's alone (SSL, its BIOs, session, record layer, keys).
 *
 * --sites: OpenSSL's allocations go through CRYPTO_set_mem_functions with a
 * 16-byte header that records the call site (OpenSSL passes __FILE__/__LINE__),
 * and the live bytes per site at idle are printed per connection: where the
 * floor goes. The header inflates every figure; use it for the breakdown only.
 *
 *   cc -O2 -Wall -o tls_idle tls_idle.c -lssl -lcrypto
 *   ./tls_idle --cert ec.crt --key ec.key [options]     (run.sh makes the keys)
 *
 * Options: --n N (2000) --tls 1.2|1.3 (1.3) --tickets N (1) --no-ticket
 * --cache off|server (off) --no-release-buffers --free-buffers
 * --bio wire|mem|pair (wire) --ciphers LIST (TLS 1.3 suites, or the TLS 1.2 list)
 * --groups LIST (the client's key-share groups) --allow-reneg --no-alpn
 * --drop-session --no-exchange --sites --quiet. --drop-session (SSL_set_session(ssl,
 * NULL) after the handshake) only measures what that throws away: it resets the
 * SSL to the version-flexible method and later records go out unprotected.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- allocation sites (--sites) ---- */

#define SITES 8192
typedef struct {
  const char *file;
  int line;
  long long live_bytes, live_count;
  long long base_bytes, base_count;
} site;
static site sites[SITES];
static int site_overflow;

typedef struct {
  uint32_t site;
  uint32_t pad;
  size_t size;
} header; /* 16 bytes: keeps glibc's 16-byte alignment for the caller */

static uint32_t site_of(const char *file, int line) {
  if (file == NULL) file = "?";
  uintptr_t h = ((uintptr_t)file * 31u) ^ (uintptr_t)line * 2654435761u;
  for (uint32_t i = 0; i < SITES; i++) {
    uint32_t k = (uint32_t)((h + i) % (SITES - 1)) + 1; /* 0: unknown */
    if (sites[k].file == file && sites[k].line == line) return k;
    if (sites[k].file == NULL) {
      sites[k].file = file;
      sites[k].line = line;
      return k;
    }
  }
  site_overflow = 1;
  return 0;
}

static void *site_malloc(size_t n, const char *file, int line) {
  header *h = malloc(sizeof *h + n);
  if (h == NULL) return NULL;
  h->site = site_of(file, line);
  h->size = n;
  sites[h->site].live_bytes += (long long)n;
  sites[h->site].live_count++;
  return h + 1;
}

static void site_free(void *p, const char *file, int line) {
  (void)file;
  (void)line;
  if (p == NULL) return;
  header *h = (header *)p - 1;
  sites[h->site].live_bytes -= (long long)h->size;
  sites[h->site].live_count--;
  free(h);
}

static void *site_realloc(void *p, size_t n, const char *file, int line) {
  if (p == NULL) return site_malloc(n, file, line);
  if (n == 0) {
    site_free(p, file, line);
    return NULL;
  }
  header *old = (header *)p - 1;
  uint32_t s = old->site;
  size_t was = old->size;
  header *h = realloc(old, sizeof *h + n);
  if (h == NULL) return NULL;
  /* The block keeps its first site: a buffer that grows is still that buffer. */
  sites[s].live_bytes += (long long)n - (long long)was;
  h->size = n;
  return h + 1;
}

static int cmp_site(const void *a, const void *b) {
  const site *x = a, *y = b;
  long long dx = x->live_bytes - x->base_bytes, dy = y->live_bytes - y->base_bytes;
  return (dy > dx) - (dy < dx);
}

/* ---- the wire: an in-memory transport that holds nothing once drained ---- */

typedef struct {
  unsigned char *buf;
  size_t off, len, cap; /* unread bytes: buf[off..len) */
} wire;

typedef struct {
  wire *in, *out;
} wire_end;

static int wire_write(BIO *b, const char *data, int n) {
  wire *w = ((wire_end *)BIO_get_data(b))->out;
  if (n <= 0) return 0;
  if (w->len + (size_t)n > w->cap) {
    size_t cap = w->cap ? w->cap : 2048;
    while (cap < w->len + (size_t)n) cap *= 2;
    unsigned char *grown = realloc(w->buf, cap);
    if (grown == NULL) return -1;
    w->buf = grown;
    w->cap = cap;
  }
  memcpy(w->buf + w->len, data, (size_t)n);
  w->len += (size_t)n;
  return n;
}

static int wire_read(BIO *b, char *data, int n) {
  wire *w = ((wire_end *)BIO_get_data(b))->in;
  BIO_clear_retry_flags(b);
  if (w->off == w->len) {
    BIO_set_retry_read(b);
    return -1;
  }
  size_t k = w->len - w->off < (size_t)n ? w->len - w->off : (size_t)n;
  memcpy(data, w->buf + w->off, k);
  w->off += k;
  if (w->off == w->len) { /* drained: give the buffer back, as Relay's BIO does */
    free(w->buf);
    w->buf = NULL;
    w->off = w->len = w->cap = 0;
  }
  return (int)k;
}

static long wire_ctrl(BIO *b, int cmd, long num, void *ptr) {
  (void)num;
  (void)ptr;
  wire_end *e = BIO_get_data(b);
  switch (cmd) {
  case BIO_CTRL_FLUSH: return 1;
  case BIO_CTRL_PENDING: return (long)(e->in->len - e->in->off);
  case BIO_CTRL_WPENDING: return (long)(e->out->len - e->out->off);
  default: return 0;
  }
}

static int wire_create(BIO *b) {
  BIO_set_init(b, 1);
  return 1;
}

static BIO_METHOD *wire_method;

/* ---- options ---- */

static struct {
  int n, tls13, tickets, no_ticket, cache_server, release, free_buffers, reneg, alpn, drop_session, exchange, sites,
      quiet;
  const char *cert, *key, *bio, *ciphers, *groups;
} opt = {2000, 1, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, NULL, NULL, "wire", NULL, NULL};

static void die(const char *what) {
  fprintf(stderr, "tls_idle: %s\n", what);
  ERR_print_errors_fp(stderr);
  exit(1);
}

static const unsigned char http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

static int alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen, const unsigned char *in, unsigned int inlen,
                   void *arg) {
  (void)s;
  (void)arg;
  unsigned char *sel = NULL;
  if (SSL_select_next_proto(&sel, outlen, http11, sizeof http11, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

/* Relay's settings (Sources/CRelayShims/relay_tls.c), each one switchable. */
static void harden(SSL_CTX *ctx, int server) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx, opt.tls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  uint64_t o = SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE;
  if (!opt.reneg) o |= SSL_OP_NO_RENEGOTIATION;
  if (server && opt.no_ticket) o |= SSL_OP_NO_TICKET;
  SSL_CTX_set_options(ctx, o);
  if (opt.release) SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_session_cache_mode(ctx, server && opt.cache_server ? SSL_SESS_CACHE_SERVER : SSL_SESS_CACHE_OFF);
  if (server) SSL_CTX_set_num_tickets(ctx, (size_t)opt.tickets);
  if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!SHA1:!RC4:!3DES") != 1)
    die("cipher list");
  if (server && opt.ciphers) {
    int ok = opt.tls13 ? SSL_CTX_set_ciphersuites(ctx, opt.ciphers) : SSL_CTX_set_cipher_list(ctx, opt.ciphers);
    if (ok != 1) die("--ciphers");
  }
  if (!server && opt.groups && SSL_CTX_set1_groups_list(ctx, opt.groups) != 1) die("--groups");
  if (server && opt.alpn) SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
}

/* ---- one connection ---- */

typedef struct {
  wire c2s, s2c;
  wire_end srv, cli;
  SSL *server;
  BIO *srv_in, *srv_out, *cli_in, *cli_out; /* --bio mem: the harness moves bytes between them */
} conn;

static void attach(conn *c, SSL *ssl, int server) {
  if (strcmp(opt.bio, "wire") == 0) {
    wire_end *e = server ? &c->srv : &c->cli;
    e->in = server ? &c->c2s : &c->s2c;
    e->out = server ? &c->s2c : &c->c2s;
    BIO *b = BIO_new(wire_method);
    if (b == NULL) die("BIO_new");
    BIO_set_data(b, e);
    SSL_set_bio(ssl, b, b);
  } else if (strcmp(opt.bio, "mem") == 0) {
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    if (in == NULL || out == NULL) die("BIO_new");
    SSL_set_bio(ssl, in, out);
    if (server) c->srv_in = in, c->srv_out = out;
    else c->cli_in = in, c->cli_out = out;
  } else {
    die("--bio: wire, mem or pair");
  }
}

/* --bio mem: what one side wrote becomes what the other reads. */
static void move(BIO *from, BIO *to) {
  char buf[4096];
  int n;
  while ((n = BIO_read(from, buf, sizeof buf)) > 0) BIO_write(to, buf, n);
}

static void shuttle(conn *c) {
  if (strcmp(opt.bio, "mem") != 0) return;
  move(c->srv_out, c->cli_in);
  move(c->cli_out, c->srv_in);
}

static int done_or_retry(SSL *s, int r) {
  if (r == 1) return 1;
  int e = SSL_get_error(s, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  die("handshake");
  return 0;
}

static const char *first_version, *first_cipher; /* of the first measured connection */

/* A full handshake, one request and one response (an HTTP upgrade's sizes), and
   the client reads whatever the server sent last (TLS 1.3 tickets). */
static void connect_pair(conn *c, SSL_CTX *cctx) {
  SSL *cl = SSL_new(cctx);
  if (cl == NULL) die("SSL_new client");
  if (strcmp(opt.bio, "pair") == 0) {
    BIO *sb, *cb;
    if (BIO_new_bio_pair(&sb, 0, &cb, 0) != 1) die("BIO_new_bio_pair");
    SSL_set_bio(c->server, sb, sb);
    SSL_set_bio(cl, cb, cb);
  } else {
    attach(c, cl, 0);
  }
  SSL_set_connect_state(cl);
  if (opt.alpn) SSL_set_alpn_protos(cl, http11, sizeof http11);
  int sd = 0, cd = 0;
  for (int i = 0; i < 100 && !(sd && cd); i++) {
    if (!cd) cd = done_or_retry(cl, SSL_do_handshake(cl));
    shuttle(c);
    if (!sd) sd = done_or_retry(c->server, SSL_do_handshake(c->server));
    shuttle(c);
  }
  if (!(sd && cd)) die("handshake did not finish");
  if (opt.exchange) {
    static char req[240], resp[160], buf[16384];
    memset(req, 'q', sizeof req);
    memset(resp, 'r', sizeof resp);
    size_t w;
    if (SSL_write_ex(cl, req, sizeof req, &w) != 1) die("client write");
    shuttle(c);
    size_t got = 0, r;
    while (got < sizeof req && SSL_read_ex(c->server, buf, sizeof buf, &r) == 1) got += r;
    if (got != sizeof req) die("server read");
    if (SSL_write_ex(c->server, resp, sizeof resp, &w) != 1) die("server write");
    shuttle(c);
    got = 0;
    while (got < sizeof resp && SSL_read_ex(cl, buf, sizeof buf, &r) == 1) got += r;
    if (got != sizeof resp) die("client read");
    /* The server's buffered input, if any, is drained: idle means nothing pending. */
    while (SSL_read_ex(c->server, buf, sizeof buf, &r) == 1) {}
  }
  ERR_clear_error();
  SSL_free(cl); /* its BIOs go with it */
  c->cli_in = c->cli_out = NULL;
  /* The client's leftovers (its close_notify was never sent: no shutdown) are
     dropped, so the server's wire holds nothing at idle. */
  free(c->c2s.buf);
  memset(&c->c2s, 0, sizeof c->c2s);
  free(c->s2c.buf);
  memset(&c->s2c, 0, sizeof c->s2c);
  if (first_version == NULL) { /* read before --drop-session resets them */
    const SSL_CIPHER *cipher = SSL_get_current_cipher(c->server);
    first_version = SSL_get_version(c->server);
    first_cipher = cipher ? SSL_CIPHER_get_name(cipher) : "(none)";
  }
  if (opt.free_buffers) SSL_free_buffers(c->server);
  if (opt.drop_session) SSL_set_session(c->server, NULL);
}

/* ---- measures ---- */

static long long heap(void) {
  struct mallinfo2 m = mallinfo2();
  return (long long)(m.uordblks + m.hblkhd);
}

static long long rss_kb(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%lld %lld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss * 4;
}

static void snapshot_base(void) {
  for (int i = 0; i < SITES; i++) sites[i].base_bytes = sites[i].live_bytes, sites[i].base_count = sites[i].live_count;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL (v ? (i++, v) : (die("missing value"), ""))
    if (!strcmp(a, "--n")) opt.n = atoi(VAL);
    else if (!strcmp(a, "--tls")) opt.tls13 = strcmp(VAL, "1.2") != 0;
    else if (!strcmp(a, "--tickets")) opt.tickets = atoi(VAL);
    else if (!strcmp(a, "--no-ticket")) opt.no_ticket = 1;
    else if (!strcmp(a, "--cache")) opt.cache_server = strcmp(VAL, "server") == 0;
    else if (!strcmp(a, "--no-release-buffers")) opt.release = 0;
    else if (!strcmp(a, "--free-buffers")) opt.free_buffers = 1;
    else if (!strcmp(a, "--bio")) opt.bio = VAL;
    else if (!strcmp(a, "--ciphers")) opt.ciphers = VAL;
    else if (!strcmp(a, "--groups")) opt.groups = VAL;
    else if (!strcmp(a, "--allow-reneg")) opt.reneg = 1;
    else if (!strcmp(a, "--no-alpn")) opt.alpn = 0;
    else if (!strcmp(a, "--drop-session")) opt.drop_session = 1;
    else if (!strcmp(a, "--no-exchange")) opt.exchange = 0;
    else if (!strcmp(a, "--sites")) opt.sites = 1;
    else if (!strcmp(a, "--quiet")) opt.quiet = 1;
    else if (!strcmp(a, "--cert")) opt.cert = VAL;
    else if (!strcmp(a, "--key")) opt.key = VAL;
    else die("unknown option (see the header of tls_idle.c)");
  }
  if (!opt.cert || !opt.key || opt.n <= 0) die("--cert and --key are required");
  /* Before OpenSSL allocates anything: every block must carry the header. */
  if (opt.sites && !CRYPTO_set_mem_functions(site_malloc, site_realloc, site_free)) die("CRYPTO_set_mem_functions");

  wire_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tls_idle wire");
  BIO_meth_set_write(wire_method, wire_write);
  BIO_meth_set_read(wire_method, wire_read);
  BIO_meth_set_ctrl(wire_method, wire_ctrl);
  BIO_meth_set_create(wire_method, wire_create);

  SSL_CTX *sctx = SSL_CTX_new(TLS_server_method()), *cctx = SSL_CTX_new(TLS_client_method());
  if (!sctx || !cctx) die("SSL_CTX_new");
  harden(sctx, 1);
  harden(cctx, 0);
  SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL); /* the client's cost is not measured */
  if (SSL_CTX_use_certificate_chain_file(sctx, opt.cert) != 1) die("certificate");
  if (SSL_CTX_use_PrivateKey_file(sctx, opt.key, SSL_FILETYPE_PEM) != 1) die("key");

  conn *conns = calloc((size_t)opt.n, sizeof *conns);
  if (conns == NULL) die("calloc");

  /* Warm-up: OpenSSL fetches algorithms and fills caches on first use (provider
     method stores, the ticket keys' contexts); that is per process, not per
     connection, so it happens before the baseline. */
  for (int i = 0; i < 8; i++) {
    conn w;
    memset(&w, 0, sizeof w);
    w.server = SSL_new(sctx);
    if (strcmp(opt.bio, "pair") != 0) attach(&w, w.server, 1);
    SSL_set_accept_state(w.server);
    connect_pair(&w, cctx);
    SSL_free(w.server);
  }
  ERR_clear_error();
  first_version = first_cipher = NULL;

  long long base = heap(), base_rss = rss_kb();
  snapshot_base();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);

  for (int i = 0; i < opt.n; i++) {
    conn *c = &conns[i];
    if ((c->server = SSL_new(sctx)) == NULL) die("SSL_new server");
    if (strcmp(opt.bio, "pair") != 0) attach(c, c->server, 1);
    SSL_set_accept_state(c->server);
  }
  long long fresh = heap();
  for (int i = 0; i < opt.n; i++) connect_pair(&conns[i], cctx);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long long idle = heap(), idle_rss = rss_kb();

  double per_new = (double)(fresh - base) / opt.n, per_idle = (double)(idle - base) / opt.n;
  double per_rss = 1024.0 * (double)(idle_rss - base_rss) / opt.n;
  if (!opt.quiet) {
    printf("openssl: %s\n", OpenSSL_version(OPENSSL_VERSION));
    printf("connections: %d, bio %s, %.1f s\n", opt.n, opt.bio,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  }
  /* One line for scripts: heap bytes per server SSL just made, and once idle. */
  printf("per_connection version=%s cipher=%s new=%.0f idle=%.0f rss_idle=%.0f\n", first_version, first_cipher, per_new,
         per_idle, per_rss);

  if (opt.sites) {
    if (site_overflow) fprintf(stderr, "tls_idle: site table full; breakdown partial\n");
    qsort(sites, SITES, sizeof *sites, cmp_site);
    printf("live bytes per idle connection by OpenSSL call site (payload, no malloc overhead):\n");
    double total = 0;
    for (int i = 0; i < SITES; i++) {
      long long d = sites[i].live_bytes - sites[i].base_bytes, k = sites[i].live_count - sites[i].base_count;
      if (d == 0) continue;
      total += (double)d / opt.n;
      if ((double)d / opt.n >= 8 || (double)d / opt.n <= -8)
        printf("  %8.1f B %6.2f blocks  %s:%d\n", (double)d / opt.n, (double)k / opt.n,
               sites[i].file ? sites[i].file : "?", sites[i].line);
    }
    printf("  %8.1f B total\n", total);
    /* The table was sorted: site ids in live headers are stale, so stop here. */
    fflush(stdout);
    _exit(0);
  }

  for (int i = 0; i < opt.n; i++) SSL_free(conns[i].server);
  long long after = heap();
  if (!opt.quiet) printf("leftover after freeing all: %.0f B per connection\n", (double)(after - base) / opt.n);
  free(conns);
  SSL_CTX_free(sctx);
  SSL_CTX_free(cctx);
  BIO_meth_free(wire_method);
  return 0;
}
