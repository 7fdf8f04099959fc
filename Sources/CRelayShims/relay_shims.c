#include "relay_shims.h"
#include <malloc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

int relay_thread_lowest_priority(void) {
#ifdef __linux__
  return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#else
  return -1; /* elsewhere the nice value is the whole process's: leave it */
#endif
}
