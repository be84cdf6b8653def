// The floor of a supervisor per job, for bench/fleet.mjs: what `kill --all`
// of N jobs would cost if each job's supervisor did nothing but what the
// design needs (a process of its own, in a session of its own, that reaps
// its job and writes its end to a file) and the killer nothing but signal
// each job, ring its supervisor and wait for it to exit.
//
//   minisup start DIR N   N supervisors, each of a `sleep 600`, detached;
//                         returns once each has written DIR/<i>.pids
//   minisup kill DIR      one pass over the process table (each process's
//                         stat and environment, as ours reads it), then
//                         SIGTERM to each job, SIGUSR1 to its supervisor,
//                         and waits until every supervisor has exited
//
// The end is written over a file made at the start (a new inode per end
// costs ext4 far more than the rest; ours swaps a file made at the start
// too).
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void supervise(const char *dir, int i) {
  setsid();
  // Its caller's pipes are not held open (the bench waits for their end).
  int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; fd++) dup2(null, fd);
  if (null > 2) close(null);
  sigset_t bells;
  sigemptyset(&bells);
  sigaddset(&bells, SIGCHLD);
  sigaddset(&bells, SIGUSR1);
  sigprocmask(SIG_BLOCK, &bells, 0);
  int wake = signalfd(-1, &bells, SFD_CLOEXEC);
  char path[4096], tmp[4096];
  snprintf(path, sizeof path, "%s/%d.end", dir, i);
  int end = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  pid_t job = fork();
  if (job == 0) {
    sigprocmask(SIG_UNBLOCK, &bells, 0);
    setsid();
    execlp("sleep", "sleep", "600", (char *)0);
    _exit(127);
  }
  // Written whole, then renamed: the killer never reads half a line.
  snprintf(tmp, sizeof tmp, "%s/%d.tmp", dir, i);
  snprintf(path, sizeof path, "%s/%d.pids", dir, i);
  FILE *pids = fopen(tmp, "w");
  fprintf(pids, "%d %d\n", (int)getpid(), (int)job);
  fclose(pids);
  rename(tmp, path);
  for (;;) {
    struct signalfd_siginfo info;
    if (read(wake, &info, sizeof info) < 0) continue;
    int status;
    if (waitpid(job, &status, WNOHANG) == job) break;
  }
  char record[4096];
  memset(record, ' ', sizeof record);
  int n = snprintf(record, sizeof record, "{\"status\":\"killed\"}");
  record[n] = ' ';
  pwrite(end, record, sizeof record, 0);
  _exit(0);
}

static int start(const char *dir, int count) {
  for (int i = 0; i < count; i++) {
    pid_t first = fork();
    if (first == 0) {
      // Twice, as a daemon does: the supervisor is nobody's child here.
      if (fork() == 0) supervise(dir, i);
      _exit(0);
    }
    waitpid(first, 0, 0);
  }
  char path[4096];
  for (int i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/%d.pids", dir, i);
    for (int tries = 0; access(path, F_OK) != 0; tries++) {
      if (tries > 20000) return fprintf(stderr, "supervisor %d did not start\n", i), 1;
      usleep(500);
    }
  }
  return 0;
}

// One pass over the process table as ours makes before it signals: each
// process's stat and environment (where a job's escaped processes are found
// by the cookie in it). Returns how many processes it read.
static int read_table(void) {
  DIR *proc = opendir("/proc");
  if (!proc) return 0;
  static char buf[1 << 16];
  int read_count = 0;
  struct dirent *entry;
  while ((entry = readdir(proc))) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const char *files[] = {"stat", "environ"};
    for (int k = 0; k < 2; k++) {
      char path[300];
      snprintf(path, sizeof path, "/proc/%s/%s", entry->d_name, files[k]);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      while (read(fd, buf, sizeof buf) > 0) {
      }
      close(fd);
    }
    read_count++;
  }
  closedir(proc);
  return read_count;
}

static int kill_all(const char *dir) {
  DIR *listing = opendir(dir);
  if (!listing) return perror(dir), 1;
  int cap = 1024, count = 0;
  int(*pairs)[2] = malloc(sizeof *pairs * cap);
  struct dirent *entry;
  while ((entry = readdir(listing))) {
    if (!strstr(entry->d_name, ".pids")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (count == cap) pairs = realloc(pairs, sizeof *pairs * (cap *= 2));
    if (fscanf(f, "%d %d", &pairs[count][0], &pairs[count][1]) == 2 && pairs[count][0] > 1 && pairs[count][1] > 1) count++;
    fclose(f);
  }
  closedir(listing);
  int table = read_table();
  int *handles = malloc(sizeof *handles * (count ? count : 1));
  for (int i = 0; i < count; i++) {
    handles[i] = (int)syscall(SYS_pidfd_open, pairs[i][0], 0);
    kill(pairs[i][1], SIGTERM);
    kill(pairs[i][0], SIGUSR1);
  }
  for (int i = 0; i < count; i++) {
    if (handles[i] < 0) continue;
    struct pollfd exited = {handles[i], POLLIN, 0};
    poll(&exited, 1, 10000);
    close(handles[i]);
  }
  printf("killed=%d table=%d\n", count, table);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "start")) return start(argv[2], atoi(argv[3]));
  if (argc == 3 && !strcmp(argv[1], "kill")) return kill_all(argv[2]);
  fprintf(stderr, "usage: minisup start DIR N | minisup kill DIR\n");
  return 2;
}
