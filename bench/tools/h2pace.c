// h2pace: an open loop of unary gRPC calls on one HTTP/2 connection, each sent
// at its own time: call i leaves at start + i / rate, not in bursts (h2load's
// rate mode sends every call due in a 10 ms tick at once). The bench's tool
// for latency below saturation (bench/h2pace.ts builds and runs it).
//
//   h2pace HOST PORT PATH BODY_FILE RATE SECONDS LOG_FILE [HEADER ...]
//
// BODY_FILE is the framed request sent as every call's body; HEADER is
// "name: value". LOG_FILE gets one line per finished call: the time it was
// due (µs, monotonic), its grpc-status (-1: none, the stream failed), and its
// latency in µs from the time it was sent. stdout: one line,
//   sent=N done=N ok=N late_p99_us=N
// where late is how long after its due time each call left (this process not
// running in time on a busy machine).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  int64_t due_us;
  int64_t sent_us;
  int64_t latency_us;
  size_t body_sent;
  int grpc_status;
  int done;
} call_t;

static int fd = -1;
static uint8_t *body;
static size_t body_len;
static call_t *calls;
static int finished = 0;

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *what) {
  fprintf(stderr, "h2pace: %s: %s\n", what, strerror(errno));
  exit(2);
}

static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags, void *user) {
  (void)session, (void)flags, (void)user;
  ssize_t n = write(fd, data, length);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
  return n;
}

static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length, uint32_t *data_flags,
                               nghttp2_data_source *source, void *user) {
  (void)source, (void)user;
  // As much of the body as flow control lets out now; the rest in later frames.
  call_t *call = nghttp2_session_get_stream_user_data(session, stream_id);
  size_t n = body_len - call->body_sent;
  if (n > length) n = length;
  memcpy(buf, body + call->body_sent, n);
  call->body_sent += n;
  if (call->body_sent == body_len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user) {
  (void)flags, (void)user, (void)valuelen;
  call_t *call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
  if (call != NULL && namelen == 11 && memcmp(name, "grpc-status", 11) == 0) call->grpc_status = atoi((const char *)value);
  return 0;
}

static int on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user) {
  (void)error_code, (void)user;
  call_t *call = nghttp2_session_get_stream_user_data(session, stream_id);
  if (call != NULL && !call->done) {
    call->done = 1;
    call->latency_us = now_us() - call->sent_us;
    finished++;
  }
  return 0;
}

static int connect_to(const char *host, const char *port) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  if (getaddrinfo(host, port, &hints, &res) != 0) die("getaddrinfo");
  int s = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  if (s < 0 || connect(s, res->ai_addr, res->ai_addrlen) != 0) die("connect");
  freeaddrinfo(res);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
  return s;
}

static void pump(nghttp2_session *session) {
  int rv = nghttp2_session_send(session);
  if (rv != 0) {
    fprintf(stderr, "h2pace: sending: %s\n", nghttp2_strerror(rv));
    exit(2);
  }
}

static void read_all(nghttp2_session *session) {
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n == 0) {
      errno = ECONNRESET;
      die("read");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      die("read");
    }
    if (nghttp2_session_mem_recv(session, buf, (size_t)n) < 0) die("nghttp2_session_mem_recv");
  }
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: h2pace HOST PORT PATH BODY_FILE RATE SECONDS LOG_FILE [HEADER ...]\n");
    return 2;
  }
  const char *host = argv[1], *port = argv[2], *path = argv[3];
  double rate = atof(argv[5]), seconds = atof(argv[6]);
  if (rate <= 0 || seconds <= 0) {
    fprintf(stderr, "h2pace: RATE and SECONDS must be above 0\n");
    return 2;
  }
  FILE *bf = fopen(argv[4], "rb");
  if (bf == NULL) die(argv[4]);
  body = malloc(1 << 16);
  body_len = fread(body, 1, 1 << 16, bf);
  fclose(bf);
  // Sleep to the µs asked, not the default 50 µs of timer slack.
  prctl(PR_SET_TIMERSLACK, 1UL);

  int total = (int)(rate * seconds + 0.5);
  calls = calloc((size_t)total, sizeof *calls);
  int nextra = argc - 8;
  nghttp2_nv *nva = calloc((size_t)(6 + nextra), sizeof *nva);
  char authority[300];
  snprintf(authority, sizeof authority, "%s:%s", host, port);
#define NV(i, n, v) (nva[i] = (nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE})
  NV(0, ":method", "POST");
  NV(1, ":scheme", "http");
  NV(2, ":authority", authority);
  NV(3, ":path", path);
  NV(4, "content-type", "application/grpc");
  NV(5, "te", "trailers");
  for (int i = 0; i < nextra; i++) {
    char *header = strdup(argv[8 + i]), *colon = strchr(header, ':');
    if (colon == NULL) {
      fprintf(stderr, "h2pace: a header is \"name: value\", got %s\n", argv[8 + i]);
      return 2;
    }
    *colon = '\0';
    char *value = colon + 1;
    while (*value == ' ') value++;
    NV(6 + i, header, value);
  }

  fd = connect_to(host, port);
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_send_callback(cbs, on_send);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
  nghttp2_session *session;
  nghttp2_session_client_new(&session, cbs, NULL);
  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1000}, {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24}};
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, 2);
  nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, 1 << 24);
  pump(session);

  nghttp2_data_provider provider = {.read_callback = read_body};
  // The first call leaves 100 ms from now: the connection's settings exchanged by then.
  int64_t start = now_us() + 100000;
  int next = 0;
  int64_t give_up = 0;
  while (finished < next || next < total) {
    int64_t now = now_us();
    while (next < total && start + (int64_t)(next * 1e6 / rate) <= now) {
      call_t *call = &calls[next];
      call->due_us = start + (int64_t)(next * 1e6 / rate);
      call->grpc_status = -1;
      call->sent_us = now_us();
      if (nghttp2_submit_request(session, NULL, nva, (size_t)(6 + nextra), &provider, call) < 0) die("nghttp2_submit_request");
      next++;
      pump(session);
    }
    if (next == total && give_up == 0) give_up = now + 5000000;
    if (give_up != 0 && now > give_up) break;
    int64_t wait_us = next < total ? start + (int64_t)(next * 1e6 / rate) - now_us() : 100000;
    if (wait_us < 0) wait_us = 0;
    struct timespec timeout = {wait_us / 1000000, (wait_us % 1000000) * 1000};
    struct pollfd pfd = {fd, POLLIN | (nghttp2_session_want_write(session) ? POLLOUT : 0), 0};
    if (ppoll(&pfd, 1, &timeout, NULL) < 0 && errno != EINTR) die("ppoll");
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) read_all(session);
    pump(session);
  }

  FILE *log = fopen(argv[7], "w");
  if (log == NULL) die(argv[7]);
  int64_t *late = malloc(sizeof(int64_t) * (size_t)(next > 0 ? next : 1));
  int ok = 0, done = 0;
  for (int i = 0; i < next; i++) {
    late[i] = calls[i].sent_us - calls[i].due_us;
    if (!calls[i].done) continue;
    done++;
    if (calls[i].grpc_status == 0) ok++;
    fprintf(log, "%lld\t%d\t%lld\n", (long long)calls[i].due_us, calls[i].grpc_status, (long long)calls[i].latency_us);
  }
  fclose(log);
  qsort(late, (size_t)next, sizeof *late, cmp64);
  printf("sent=%d done=%d ok=%d late_p99_us=%lld\n", next, done, ok, next > 0 ? (long long)late[(size_t)(next * 99 / 100)] : 0LL);
  nghttp2_session_del(session);
  close(fd);
  return 0;
}
