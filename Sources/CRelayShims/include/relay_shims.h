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

/* uv_loop_configure(loop, UV_METRICS_IDLE_TIME) (variadic): makes libuv account the
   time it blocks in the poll, read back with uv_metrics_idle_time. 0 on success. */
int relay_loop_measure_idle_time(uv_loop_t *loop);

/* setpriority(PRIO_PROCESS, gettid(), nice): on Linux the nice value is the calling
   thread's own (setpriority(2), NOTES), which <sys/resource.h>'s enum-typed `which`
   and gettid make awkward from Swift. 0 on success. */
int relay_thread_set_nice(int nice);
/* getpriority(PRIO_PROCESS, gettid()): the calling thread's nice value. */
int relay_thread_nice(void);

#endif
