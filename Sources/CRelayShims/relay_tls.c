#include "relay_tls.h"
#include <stdlib.h>
#include <string.h>

static const unsigned char http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

/* RFC 7301 §3.2: the server picks one protocol of the client's list; a client
   that offers ALPN without http/1.1 gets no ALPN (the handshake goes on). */
static int select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                         const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  unsigned char *selected = NULL;
  if (SSL_select_next_proto(&selected, outlen, http11, sizeof http11, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

int relay_tls_ctx_harden(SSL_CTX *ctx, int server) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) return 0;
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  /* No server-side session cache: every cached session is memory held per
     connection ever made. Resumption still works through stateless tickets
     (RFC 8446 §4.6.1), one per handshake. */
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (server) SSL_CTX_set_num_tickets(ctx, 1);
  /* TLS 1.2 suites: OpenSSL's defaults less everything without forward secrecy or
     AEAD; TLS 1.3 suites are all modern and stay at their defaults. */
  if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!SHA1:!RC4:!3DES") != 1) return 0;
  if (server) SSL_CTX_set_alpn_select_cb(ctx, select_http11, NULL);
  return 1;
}

static int io_write(BIO *bio, const char *data, int length) {
  relay_tls_io *io = BIO_get_data(bio);
  if (length <= 0) return 0;
  size_t need = io->out_len + (size_t)length;
  if (need > io->out_cap) {
    size_t cap = io->out_cap ? io->out_cap : 1024;
    while (cap < need) cap *= 2;
    unsigned char *grown = realloc(io->out, cap);
    if (grown == NULL) return -1;
    io->out = grown;
    io->out_cap = cap;
  }
  memcpy(io->out + io->out_len, data, (size_t)length);
  io->out_len = need;
  return length;
}

static int io_read(BIO *bio, char *data, int length) {
  relay_tls_io *io = BIO_get_data(bio);
  BIO_clear_retry_flags(bio);
  if (io->in_len == 0) {
    BIO_set_retry_read(bio); /* "no more now", not end of file */
    return -1;
  }
  size_t n = io->in_len < (size_t)length ? io->in_len : (size_t)length;
  memcpy(data, io->in, n);
  io->in += n;
  io->in_len -= n;
  return (int)n;
}

static long io_ctrl(BIO *bio, int cmd, long num, void *ptr) {
  (void)num;
  (void)ptr;
  relay_tls_io *io = BIO_get_data(bio);
  switch (cmd) {
  case BIO_CTRL_FLUSH: return 1;
  case BIO_CTRL_PENDING: return (long)io->in_len;
  case BIO_CTRL_WPENDING: return (long)io->out_len;
  default: return 0;
  }
}

static int io_create(BIO *bio) {
  BIO_set_init(bio, 1);
  return 1;
}

static BIO_METHOD *io_method(void) {
  static BIO_METHOD *method = NULL; /* made once, on the loop thread, never freed */
  if (method == NULL) {
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "relay tls io");
    BIO_meth_set_write(method, io_write);
    BIO_meth_set_read(method, io_read);
    BIO_meth_set_ctrl(method, io_ctrl);
    BIO_meth_set_create(method, io_create);
  }
  return method;
}

BIO *relay_tls_bio_new(relay_tls_io *io) {
  BIO *bio = BIO_new(io_method());
  if (bio != NULL) BIO_set_data(bio, io);
  return bio;
}

void relay_tls_io_take(relay_tls_io *io) {
  free(io->out);
  io->out = NULL;
  io->out_len = 0;
  io->out_cap = 0;
}

int relay_tls_set_sni(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

int relay_tls_offer_http11(SSL *ssl) { return SSL_set_alpn_protos(ssl, http11, sizeof http11) == 0; }

size_t relay_tls_alpn_selected(SSL *ssl, char *out, size_t capacity) {
  const unsigned char *data = NULL;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl, &data, &length);
  if (data == NULL || length == 0 || length + 1 > capacity) return 0;
  memcpy(out, data, length);
  out[length] = 0;
  return length;
}
