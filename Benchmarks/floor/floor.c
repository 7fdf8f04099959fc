/*
 * The floor: the least a room-broadcast WebSocket server on libuv can do per
 * delivery, to read Relay's fan-out figures against (Benchmarks/floor/README.md).
 *
 * ws://HOST:PORT/<room>: every text frame a client sends goes to every client in
 * that room, the sender included (relay-bots' `--protocol broadcast`). Each frame
 * is copied into one contiguous buffer per recipient; every connection written
 * during a loop turn is flushed once, from a check handle, with one write.
 * RFC 6455 only as far as the bots need: masked client frames, no fragmentation,
 * ping -> pong, close -> close. Not a server to deploy: no limits, no timeouts.
 *
 * cc -O2 -o floor floor.c -luv -lcrypto && ./floor --port 9000
 *
 * --user-ns N (default 0) spends N ns of user time per frame queued, to bring the
 * floor down to a slower server's throughput and compare the kernel's cost per
 * delivery at equal deliveries/s (Benchmarks/results/fanout-kernel.md).
 *
 * --ping-ms N (default 0: never) pings every client right after its upgrade and then
 * every N ms, as Relay's heartbeat does (RFC 6455 5.5.2); the bots answer each ping
 * with a pong. A client that sends data right after receiving some puts its socket
 * in TCP's interactive ("pingpong") delayed-ACK mode, which changes where its ACKs
 * are generated (Benchmarks/results/fanout-kernel.md); Relay's clients always do
 * (hello, join, pongs), so this gives the floor's clients the same exchange.
 */
#define _GNU_SOURCE /* strcasestr */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

typedef struct conn conn;
typedef struct {
  char name[64];
  conn **members;
  size_t count, cap;
} room;

struct conn {
  uv_tcp_t tcp;
  room *room;
  int upgraded, dirty, closing;
  unsigned char *in; /* unparsed input (head, then partial frames) */
  size_t in_len, in_cap;
  unsigned char *out; /* frames queued this turn */
  size_t out_len, out_cap;
  conn *next_dirty;
};

static uv_loop_t *loop;
static room rooms[256];
static size_t room_count;
static conn *dirty_list;
static char read_buffer[65536];
static uint64_t user_ns_per_frame;
static uint64_t ping_ms;
static const unsigned char ping_frame[2] = {0x89, 0x00};

static void grow(unsigned char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return;
  size_t c = *cap ? *cap : 4096;
  while (c < need) c *= 2;
  *buf = realloc(*buf, c);
  *cap = c;
}

static room *find_room(const char *name, size_t len) {
  for (size_t i = 0; i < room_count; i++)
    if (strlen(rooms[i].name) == len && memcmp(rooms[i].name, name, len) == 0) return &rooms[i];
  if (room_count == 256 || len >= 64) return NULL;
  room *r = &rooms[room_count++];
  memcpy(r->name, name, len);
  r->name[len] = 0;
  return r;
}

/* Busy user time (see --user-ns): the clock is read through the vDSO, no syscall. */
static void spend_user_time(uint64_t ns) {
  uint64_t until = uv_hrtime() + ns;
  while (uv_hrtime() < until) {
  }
}

static void queue_bytes(conn *c, const unsigned char *bytes, size_t len) {
  if (c->closing) return;
  grow(&c->out, &c->out_cap, c->out_len + len);
  memcpy(c->out + c->out_len, bytes, len);
  c->out_len += len;
  if (!c->dirty) {
    c->dirty = 1;
    c->next_dirty = dirty_list;
    dirty_list = c;
  }
}

static void on_closed(uv_handle_t *h) {
  conn *c = (conn *)h;
  free(c->in);
  free(c->out);
  free(c);
}

static void close_conn(conn *c) {
  if (c->closing) return;
  c->closing = 1;
  if (c->room) {
    room *r = c->room;
    for (size_t i = 0; i < r->count; i++)
      if (r->members[i] == c) { r->members[i] = r->members[--r->count]; break; }
  }
  uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_write(uv_write_t *req, int status) {
  (void)status;
  free(req->data);
  free(req);
}

/* The cork: one write per connection written this turn. */
static void flush(uv_check_t *h) {
  (void)h;
  while (dirty_list) {
    conn *c = dirty_list;
    dirty_list = c->next_dirty;
    c->dirty = 0;
    if (c->closing || c->out_len == 0) continue;
    uv_buf_t buf = uv_buf_init((char *)c->out, (unsigned)c->out_len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &buf, 1);
    if (n < 0 && n != UV_EAGAIN) { close_conn(c); continue; }
    size_t done = n > 0 ? (size_t)n : 0;
    if (done < c->out_len) { /* the rest in one uv_write, with its own copy */
      size_t left = c->out_len - done;
      uv_write_t *req = malloc(sizeof *req);
      req->data = malloc(left);
      memcpy(req->data, c->out + done, left);
      uv_buf_t rest = uv_buf_init(req->data, (unsigned)left);
      if (uv_write(req, (uv_stream_t *)&c->tcp, &rest, 1, on_write) != 0) { free(req->data); free(req); close_conn(c); }
    }
    c->out_len = 0;
  }
}

static void upgrade(conn *c) {
  unsigned char *end = NULL;
  for (size_t i = 3; i < c->in_len; i++)
    if (memcmp(c->in + i - 3, "\r\n\r\n", 4) == 0) { end = c->in + i + 1; break; }
  if (!end) return;
  char *head = (char *)c->in;
  char *path = strchr(head, ' ');
  char *path_end = path ? strchr(path + 1, ' ') : NULL;
  char *key = strcasestr(head, "\r\nSec-WebSocket-Key:");
  if (!path || !path_end || !key || path[1] != '/') { close_conn(c); return; }
  key += 20;
  while (*key == ' ') key++;
  char *key_end = strstr(key, "\r\n");
  char material[128];
  int klen = (int)(key_end - key);
  if (klen <= 0 || klen > 60) { close_conn(c); return; }
  snprintf(material, sizeof material, "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", klen, key);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1((unsigned char *)material, strlen(material), digest);
  unsigned char accept[64];
  EVP_EncodeBlock(accept, digest, SHA_DIGEST_LENGTH);
  char response[256];
  int n = snprintf(response, sizeof response,
                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
  room *r = find_room(path + 2, (size_t)(path_end - path - 2));
  if (!r) { close_conn(c); return; }
  if (r->count == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 16;
    r->members = realloc(r->members, r->cap * sizeof *r->members);
  }
  r->members[r->count++] = c;
  c->room = r;
  c->upgraded = 1;
  queue_bytes(c, (unsigned char *)response, (size_t)n);
  if (ping_ms) queue_bytes(c, ping_frame, sizeof ping_frame);
  size_t used = (size_t)(end - c->in);
  memmove(c->in, end, c->in_len - used);
  c->in_len -= used;
}

/* Parses whole frames from c->in; a text frame goes to the room, framed once
   (server frames are unmasked) and copied into each member's buffer. */
static void frames(conn *c) {
  size_t at = 0;
  while (!c->closing && c->in_len - at >= 2) {
    unsigned char *f = c->in + at;
    int opcode = f[0] & 0x0f;
    size_t len = f[1] & 0x7f, hdr = 2;
    if (len == 126) {
      if (c->in_len - at < 4) break;
      len = (size_t)f[2] << 8 | f[3];
      hdr = 4;
    } else if (len == 127) {
      if (c->in_len - at < 10) break;
      len = 0;
      for (int i = 0; i < 8; i++) len = len << 8 | f[2 + i];
      hdr = 10;
    }
    if (!(f[1] & 0x80)) { close_conn(c); return; }
    if (c->in_len - at < hdr + 4 + len) break;
    unsigned char *mask = f + hdr, *payload = f + hdr + 4;
    for (size_t i = 0; i < len; i++) payload[i] ^= mask[i & 3];
    unsigned char out_hdr[10];
    size_t oh = 2;
    out_hdr[0] = (unsigned char)(0x80 | opcode);
    if (len < 126) {
      out_hdr[1] = (unsigned char)len;
    } else if (len < 65536) {
      out_hdr[1] = 126;
      out_hdr[2] = (unsigned char)(len >> 8);
      out_hdr[3] = (unsigned char)len;
      oh = 4;
    } else {
      out_hdr[1] = 127;
      for (int i = 0; i < 8; i++) out_hdr[2 + i] = (unsigned char)(len >> (56 - 8 * i));
      oh = 10;
    }
    if (opcode == 1 && c->room) {
      room *r = c->room;
      for (size_t i = 0; i < r->count; i++) {
        queue_bytes(r->members[i], out_hdr, oh);
        queue_bytes(r->members[i], payload, len);
        if (user_ns_per_frame) spend_user_time(user_ns_per_frame);
      }
    } else if (opcode == 9) {
      out_hdr[0] = 0x8a;
      queue_bytes(c, out_hdr, oh);
      queue_bytes(c, payload, len);
    } else if (opcode == 8) {
      queue_bytes(c, out_hdr, oh);
      queue_bytes(c, payload, len);
      flush(NULL);
      close_conn(c);
      return;
    }
    at += hdr + 4 + len;
  }
  memmove(c->in, c->in + at, c->in_len - at);
  c->in_len -= at;
}

static void ping_all(uv_timer_t *t) {
  (void)t;
  for (size_t i = 0; i < room_count; i++)
    for (size_t k = 0; k < rooms[i].count; k++) queue_bytes(rooms[i].members[k], ping_frame, sizeof ping_frame);
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
  (void)h;
  (void)size;
  *buf = uv_buf_init(read_buffer, sizeof read_buffer);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  conn *c = (conn *)s;
  if (n < 0) { close_conn(c); return; }
  if (n == 0) return;
  grow(&c->in, &c->in_cap, c->in_len + (size_t)n + 1);
  memcpy(c->in + c->in_len, buf->base, (size_t)n);
  c->in_len += (size_t)n;
  c->in[c->in_len] = 0;
  if (!c->upgraded) upgrade(c);
  if (c->upgraded) frames(c);
}

static void on_connection(uv_stream_t *server, int status) {
  if (status < 0) return;
  conn *c = calloc(1, sizeof *c);
  uv_tcp_init(loop, &c->tcp);
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) { uv_close((uv_handle_t *)&c->tcp, on_closed); return; }
  uv_tcp_nodelay(&c->tcp, 1);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int main(int argc, char **argv) {
  int port = 0;
  for (int i = 1; i + 1 < argc; i += 2)
    if (strcmp(argv[i], "--port") == 0) port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--user-ns") == 0) user_ns_per_frame = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--ping-ms") == 0) ping_ms = strtoull(argv[i + 1], NULL, 10);
  if (port <= 0) { fprintf(stderr, "usage: floor --port PORT\n"); return 2; }
  loop = uv_default_loop();
  uv_tcp_t server;
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", port, &addr);
  uv_tcp_init(loop, &server);
  if (uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0) != 0 ||
      uv_listen((uv_stream_t *)&server, 4096, on_connection) != 0) {
    fprintf(stderr, "cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  uv_check_t check;
  uv_check_init(loop, &check);
  uv_check_start(&check, flush);
  uv_timer_t pinger;
  uv_timer_init(loop, &pinger);
  if (ping_ms) uv_timer_start(&pinger, ping_all, ping_ms, ping_ms);
  printf("listening on ws://127.0.0.1:%d\n", port);
  fflush(stdout);
  return uv_run(loop, UV_RUN_DEFAULT);
}
