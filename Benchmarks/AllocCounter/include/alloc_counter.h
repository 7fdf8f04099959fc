#ifndef RELAY_ALLOC_COUNTER_H
#define RELAY_ALLOC_COUNTER_H
#include <stdint.h>

/* Counts heap allocations made by this process while counting is on.
   Linked only into relay-bench: it replaces malloc and friends in the
   executable and forwards to glibc's __libc_* entry points. */
void relay_alloc_counting(int on);
uint64_t relay_alloc_count(void);
uint64_t relay_alloc_bytes(void);
void relay_alloc_reset(void);
/* Heap bytes in use (malloc_usable_size of every live block). */
int64_t relay_live_bytes(void);

#endif
