// The floor for a process snapshot: one pass = opendir("/proc"), and for every
// numeric entry open + read + close /proc/<pid>/stat (with --cmdline, also
// /proc/<pid>/cmdline, as snapshot() reads both). Nothing is parsed or kept.
//
//   statloop <passes> [--cmdline]
//
// Prints one line: the average microseconds per full pass, the number of
// processes read in the last pass, the fastest pass in microseconds.
//   avg_us=<float> procs=<int> min_us=<float>

#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char buf[65536];

static int read_file(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
  }
  close(fd);
  return n == 0;
}

static double elapsed_us(const struct timespec *a, const struct timespec *b) {
  return (b->tv_sec - a->tv_sec) * 1e6 + (b->tv_nsec - a->tv_nsec) / 1e3;
}

int main(int argc, char **argv) {
  int passes = argc > 1 ? atoi(argv[1]) : 10;
  int with_cmdline = argc > 2 && strcmp(argv[2], "--cmdline") == 0;
  if (passes < 1) passes = 1;
  char path[300];
  int procs = 0;
  double min_us = -1;
  struct timespec t0, t1, p0, p1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < passes; i++) {
    clock_gettime(CLOCK_MONOTONIC, &p0);
    DIR *dir = opendir("/proc");
    if (!dir) {
      perror("opendir /proc");
      return 1;
    }
    procs = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
      if (!read_file(path)) continue; // exited meanwhile
      if (with_cmdline) {
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        read_file(path);
      }
      procs++;
    }
    closedir(dir);
    clock_gettime(CLOCK_MONOTONIC, &p1);
    double us = elapsed_us(&p0, &p1);
    if (min_us < 0 || us < min_us) min_us = us;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("avg_us=%.1f procs=%d min_us=%.1f\n", elapsed_us(&t0, &t1) / passes, procs, min_us);
  return 0;
}
