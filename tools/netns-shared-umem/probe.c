// Does XDP_SHARED_UMEM work across network namespaces? (issue 15: ports in more
// than one namespace). Run by probe.sh, which makes the namespaces and cleans up.
//
// usage: probe NS_X DEV_X NS_Y DEV_Y NS_OF_SECOND_SOCKET
// The first socket is made in NS_X, registers a UMEM and binds DEV_X queue 0; the
// second is made in NS_OF_SECOND_SOCKET and binds DEV_Y (its ifindex looked up in
// NS_Y) queue 0 with XDP_SHARED_UMEM on the first. Exit 0: bound; 2: refused (errno
// printed).
#define _GNU_SOURCE
#include <linux/if_xdp.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sched.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
static int sock_in(const char *ns, int home) {
  char p[256]; snprintf(p, sizeof p, "/run/netns/%s", ns);
  int fd = open(p, O_RDONLY); if (fd < 0) { perror(p); exit(1); }
  if (setns(fd, CLONE_NEWNET)) { perror("setns"); exit(1); }
  int s = socket(AF_XDP, SOCK_RAW, 0);
  if (s < 0) { perror("socket"); exit(1); }
  setns(home, CLONE_NEWNET); close(fd); return s;
}
static unsigned idx_in(const char *ns, const char *dev, int home) {
  char p[256]; snprintf(p, sizeof p, "/run/netns/%s", ns);
  int fd = open(p, O_RDONLY); setns(fd, CLONE_NEWNET);
  unsigned i = if_nametoindex(dev); setns(home, CLONE_NEWNET); close(fd); return i;
}
static void rings(int s, int rx) {
  int n = 2048;
  if (setsockopt(s, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof n)) perror("fill");
  if (setsockopt(s, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof n)) perror("comp");
  if (rx && setsockopt(s, SOL_XDP, XDP_RX_RING, &n, sizeof n)) perror("rx");
}
int main(int argc, char **argv) {
  // argv: nsX devX nsY devY nsForSecondSocket
  int home = open("/proc/self/ns/net", O_RDONLY);
  size_t len = 4096 * 4096;
  void *mem = mmap(0, len, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
  int s1 = sock_in(argv[1], home);
  struct xdp_umem_reg r = { .addr = (unsigned long)mem, .len = len, .chunk_size = 4096 };
  if (setsockopt(s1, SOL_XDP, XDP_UMEM_REG, &r, sizeof r)) { perror("umem reg"); return 1; }
  rings(s1, 1);
  struct sockaddr_xdp a = { .sxdp_family = AF_XDP, .sxdp_ifindex = idx_in(argv[1], argv[2], home), .sxdp_queue_id = 0, .sxdp_flags = XDP_COPY };
  if (bind(s1, (void*)&a, sizeof a)) { printf("bind s1 (%s/%s ifindex %u): %s\n", argv[1], argv[2], a.sxdp_ifindex, strerror(errno)); return 1; }
  printf("s1 bound: %s/%s ifindex %u (registers the UMEM)\n", argv[1], argv[2], a.sxdp_ifindex);
  int s2 = sock_in(argv[5], home);
  rings(s2, 1);
  struct sockaddr_xdp b = { .sxdp_family = AF_XDP, .sxdp_ifindex = idx_in(argv[3], argv[4], home), .sxdp_queue_id = 0, .sxdp_flags = XDP_SHARED_UMEM, .sxdp_shared_umem_fd = s1 };
  if (bind(s2, (void*)&b, sizeof b)) { printf("bind s2 shared (socket made in %s, device %s/%s ifindex %u): errno %d %s\n", argv[5], argv[3], argv[4], b.sxdp_ifindex, errno, strerror(errno)); return 2; }
  printf("s2 bound XDP_SHARED_UMEM: socket made in %s, device %s/%s ifindex %u: OK\n", argv[5], argv[3], argv[4], b.sxdp_ifindex);
  return 0;
}
