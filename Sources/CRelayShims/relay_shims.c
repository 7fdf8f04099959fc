#define _GNU_SOURCE
#include "relay_shims.h"
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

int relay_heap_trim(void) { return malloc_trim(0); }

void relay_heap_usage(size_t *in_use, size_t *free_held) {
  struct mallinfo2 info = mallinfo2();
  *in_use = info.uordblks;
  *free_held = info.fordblks;
}

int relay_loop_measure_idle_time(uv_loop_t *loop) {
  return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}

int relay_thread_set_nice(int nice) { return setpriority(PRIO_PROCESS, (id_t)gettid(), nice); }

int relay_thread_nice(void) { return getpriority(PRIO_PROCESS, (id_t)gettid()); }
