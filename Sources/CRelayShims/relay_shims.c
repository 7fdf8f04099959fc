#include "relay_shims.h"
#include <malloc.h>

int relay_heap_trim(void) { return malloc_trim(0); }

void relay_heap_usage(size_t *in_use, size_t *free_held) {
  struct mallinfo2 info = mallinfo2();
  *in_use = info.uordblks;
  *free_held = info.fordblks;
}

int relay_loop_measure_idle_time(uv_loop_t *loop) {
  return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}
