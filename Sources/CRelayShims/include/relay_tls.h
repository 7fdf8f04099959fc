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

/* BIO_pending (a macro over BIO_ctrl): bytes waiting in a memory BIO. */
size_t relay_tls_bio_pending(BIO *bio);

/* SSL_set_tlsext_host_name (a macro over SSL_ctrl): SNI for a client. */
int relay_tls_set_sni(SSL *ssl, const char *name);

/* The client offers ALPN "http/1.1" (the wire format is a length-prefixed list). */
int relay_tls_offer_http11(SSL *ssl);

/* The ALPN protocol selected on this connection, copied into out (NUL-terminated);
   0 when none. */
size_t relay_tls_alpn_selected(SSL *ssl, char *out, size_t capacity);

#endif
