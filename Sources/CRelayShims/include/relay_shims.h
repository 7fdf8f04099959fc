#ifndef RELAY_SHIMS_H
#define RELAY_SHIMS_H

/*
 * Real C functions for C API that Swift cannot import: function-like macros,
 * variadic functions and static header functions (DESIGN.md, "libuv and Swift 6
 * rules"; ANCHORS.md 4.5 item 9 lists the probe failures). Thin wrappers only: no
 * logic lives here.
 */

#include <stddef.h>
#include <uv.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

/* SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl. Returns 1 on success. */
int relay_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version);

/* SSL_CTX_set_options with SSL_OP_NO_COMPRESSION (the constant is a macro expression). */
uint64_t relay_ssl_ctx_disable_compression(SSL_CTX *ctx);

/* BIO_pending is a macro over BIO_ctrl: bytes waiting to be read from a memory BIO. */
size_t relay_bio_pending(BIO *bio);

/* OPENSSL_free is a macro over CRYPTO_free carrying __FILE__ and __LINE__. */
void relay_openssl_free(void *pointer);

/* glibc's mallinfo2 (malloc.h is not in Swift's Glibc module): heap bytes in use
   and held free by the allocator, for /metrics. */
void relay_heap_usage(size_t *in_use, size_t *free_held);
/* glibc's malloc_trim(0): returns freed heap pages to the system; 1 if any were. */
int relay_heap_trim(void);

#endif
