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

/* glibc's mallinfo2 (malloc.h is not in Swift's Glibc module): heap bytes in use
   and held free by the allocator, for /metrics. */
void relay_heap_usage(size_t *in_use, size_t *free_held);
/* glibc's malloc_trim(0): returns freed heap pages to the system; 1 if any were. */
int relay_heap_trim(void);

#endif
