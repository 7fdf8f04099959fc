#include "alloc_counter.h"
#include <stddef.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static int counting;
static uint64_t count;
static uint64_t bytes;

static inline void note(size_t n) {
  if (counting) { count++; bytes += n; }
}

void relay_alloc_counting(int on) { counting = on; }
uint64_t relay_alloc_count(void) { return count; }
uint64_t relay_alloc_bytes(void) { return bytes; }
void relay_alloc_reset(void) { count = 0; bytes = 0; }

void *malloc(size_t n) { note(n); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note(a * b); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note(n); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t al, size_t n) { note(n); return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { note(n); return __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n) {
  note(n);
  void *p = __libc_memalign(al, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
