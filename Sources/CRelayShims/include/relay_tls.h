#ifndef RELAY_TLS_H
#define RELAY_TLS_H

/*
 * OpenSSL calls that Swift cannot import (function-like macros, macro constants
 * built from expressions, callbacks that must be C). Thin wrappers only; the TLS
 * logic is RelayCrypto's TLS.swift.
 */

#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>

/* Server or client context hardened as the relay wants it: TLS 1.2 minimum, no
   renegotiation, no compression, SSL_MODE_RELEASE_BUFFERS (an idle connection
   holds no 16 KiB record buffers), and for servers ALPN "http/1.1" selected when
   the client offers it. Returns 1 on success. */
int relay_tls_ctx_harden(SSL_CTX *ctx, int server);

/* The bytes between one TLS connection and its socket, owned by the Swift side.
   `in`/`in_len`: ciphertext read from the socket, lent for one call (the BIO
   reads from it in place, without copying it into a buffer of its own).
   `out`/`out_len`/`out_cap`: ciphertext OpenSSL wrote, in a malloc'd buffer that
   relay_tls_io_take empties. Unlike a memory BIO, nothing is kept once drained:
   an idle connection holds no buffer, whatever the largest message it carried. */
typedef struct {
  const unsigned char *in;
  size_t in_len;
  unsigned char *out;
  size_t out_len;
  size_t out_cap;
} relay_tls_io;

/* A BIO over `io` (source and sink both); `io` must outlive it. NULL on failure. */
BIO *relay_tls_bio_new(relay_tls_io *io);

/* Frees the output buffer (after its bytes were copied out). */
void relay_tls_io_take(relay_tls_io *io);

/* SSL_set_tlsext_host_name (a macro over SSL_ctrl): SNI for a client. */
int relay_tls_set_sni(SSL *ssl, const char *name);

/* The client offers ALPN "http/1.1" (the wire format is a length-prefixed list). */
int relay_tls_offer_http11(SSL *ssl);

/* The ALPN protocol selected on this connection, copied into out (NUL-terminated);
   0 when none. */
size_t relay_tls_alpn_selected(SSL *ssl, char *out, size_t capacity);

#endif
