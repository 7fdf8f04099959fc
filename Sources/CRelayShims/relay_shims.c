#include "relay_shims.h"
#include <malloc.h>

int relay_ssl_ctx_set_min_proto_version(SSL_CTX *ctx, int version) {
  return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

uint64_t relay_ssl_ctx_disable_compression(SSL_CTX *ctx) {
  return (uint64_t)SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
}

size_t relay_bio_pending(BIO *bio) {
  return (size_t)BIO_pending(bio);
}

void relay_openssl_free(void *pointer) {
  OPENSSL_free(pointer);
}

int relay_heap_trim(void) { return malloc_trim(0); }

void relay_heap_usage(size_t *in_use, size_t *free_held) {
  struct mallinfo2 info = mallinfo2();
  *in_use = info.uordblks;
  *free_held = info.fordblks;
}
