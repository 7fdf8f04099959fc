/*
 * Where copying queued frames into one contiguous buffer (one write) stops paying
 * against handing the kernel one iovec per frame (writev): the question behind
 * Loop.coalesceLimit and Loop.copyLimit (Benchmarks/results/fanout-kernel.md).
 *
 * One loopback TCP connection; a reader thread pinned to core 1 drains it. The
 * writer, pinned to core 0, sends batches of TOTAL bytes made of FRAME-byte frames,
 * each frame its own heap block (as shared frames are), either
 *   writev: one writev of TOTAL/FRAME iovecs, or
 *   copy:   memcpy of every frame into one scratch buffer, then one write.
 * The socket is blocking, so each call sends the whole batch. The figure is the
 * writer thread's CPU time (user + kernel, CLOCK_THREAD_CPUTIME_ID) per batch; on
 * loopback it includes the receiver's TCP processing, which runs in the sender's
 * context, equally for both. The two variants alternate in rounds; medians.
 *
 * cc -O2 -pthread -o crossover crossover.c && ./crossover
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *reader(void *arg) {
  int fd = *(int *)arg;
  pin(1);
  static char buf[1 << 18];
  while (read(fd, buf, sizeof buf) > 0) {
  }
  return NULL;
}

static double thread_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  pin(0);
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  bind(ls, (struct sockaddr *)&a, sizeof a);
  listen(ls, 1);
  getsockname(ls, (struct sockaddr *)&a, &al);
  int w = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(w, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); return 1; }
  int r = accept(ls, NULL, NULL);
  setsockopt(w, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pthread_t th;
  pthread_create(&th, NULL, reader, &r);

  static const size_t totals[] = {4096, 16384, 65536, 262144};
  static const size_t frames[] = {128, 512, 2048, 8192};
  enum { ROUNDS = 15, MIN_BATCHES = 200 };
  char *scratch = malloc(262144);
  printf("%8s %7s %7s %12s %12s %8s\n", "total", "frame", "iovecs", "writev ns", "copy ns", "copy/wv");
  for (size_t ti = 0; ti < sizeof totals / sizeof *totals; ti++) {
    for (size_t fi = 0; fi < sizeof frames / sizeof *frames; fi++) {
      size_t total = totals[ti], frame = frames[fi], n = total / frame;
      if (n < 2 || n > 1024) continue;
      struct iovec *iov = malloc(n * sizeof *iov);
      for (size_t i = 0; i < n; i++) {
        iov[i].iov_base = malloc(frame);
        memset(iov[i].iov_base, (int)i, frame);
        iov[i].iov_len = frame;
      }
      /* About 64 MiB per measurement, at least MIN_BATCHES batches. */
      size_t batches = (64u << 20) / total;
      if (batches < MIN_BATCHES) batches = MIN_BATCHES;
      double wv[ROUNDS], cp[ROUNDS];
      for (int round = 0; round < 2 * ROUNDS; round++) {
        int copy = (round & 1) ^ ((round >> 1) & 1); /* AB BA AB ...: neither always first */
        double t0 = thread_ns();
        for (size_t b = 0; b < batches; b++) {
          if (copy) {
            size_t at = 0;
            for (size_t i = 0; i < n; i++) {
              memcpy(scratch + at, iov[i].iov_base, frame);
              at += frame;
            }
            if (write(w, scratch, total) != (ssize_t)total) { perror("write"); return 1; }
          } else if (writev(w, iov, (int)n) != (ssize_t)total) {
            perror("writev");
            return 1;
          }
        }
        double ns = (thread_ns() - t0) / batches;
        if (copy) cp[round / 2] = ns; else wv[round / 2] = ns;
      }
      qsort(wv, ROUNDS, sizeof *wv, cmp);
      qsort(cp, ROUNDS, sizeof *cp, cmp);
      printf("%8zu %7zu %7zu %12.0f %12.0f %8.2f\n", total, frame, n, wv[ROUNDS / 2], cp[ROUNDS / 2],
             cp[ROUNDS / 2] / wv[ROUNDS / 2]);
      fflush(stdout);
      for (size_t i = 0; i < n; i++) free(iov[i].iov_base);
      free(iov);
    }
  }
  shutdown(w, SHUT_WR);
  pthread_join(th, NULL);
  return 0;
}
