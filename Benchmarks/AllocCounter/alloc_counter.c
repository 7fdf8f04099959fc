#include "alloc_counter.h"
#include <stddef.h>
#include <errno.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
extern size_t malloc_usable_size(void *);

static int counting;
static uint64_t count;
static uint64_t bytes;
static int64_t live;

static inline void note(size_t n) {
  if (counting) { count++; bytes += n; }
}

/* Live heap bytes (usable sizes), counted whether or not counting is on. */
static inline void *track(void *p) {
  if (p) live += (int64_t)malloc_usable_size(p);
  return p;
}

void relay_alloc_counting(int on) { counting = on; }
uint64_t relay_alloc_count(void) { return count; }
uint64_t relay_alloc_bytes(void) { return bytes; }
int64_t relay_live_bytes(void) { return live; }
void relay_alloc_reset(void) { count = 0; bytes = 0; }

void *malloc(size_t n) { note(n); return track(__libc_malloc(n)); }
void *calloc(size_t a, size_t b) { note(a * b); return track(__libc_calloc(a, b)); }
void *realloc(void *p, size_t n) {
  note(n);
  if (p) live -= (int64_t)malloc_usable_size(p);
  return track(__libc_realloc(p, n));
}
void free(void *p) {
  if (p) live -= (int64_t)malloc_usable_size(p);
  __libc_free(p);
}
void *memalign(size_t al, size_t n) { note(n); return track(__libc_memalign(al, n)); }
void *aligned_alloc(size_t al, size_t n) { note(n); return track(__libc_memalign(al, n)); }
int posix_memalign(void **out, size_t al, size_t n) {
  note(n);
  void *p = track(__libc_memalign(al, n));
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
