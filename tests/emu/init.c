/* Guest /init for tests/emu/bochs_run.sh (runs as PID 1 inside Bochs).
 * Runs /hy/prog with the NUL-separated argv stored in /hy/args, sends its
 * stdout+stderr to the serial console between the marker lines
 * "HY_BEGIN" and "HY_EXIT=<code>" (128+N if killed by signal N), then powers
 * the emulator off.
 * Build: gcc -static -O2 -o init init.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>

static void say(const char *s)
{
    (void)!write(1, s, strlen(s));
}

static void power_off(void)
{
    sync();
    /* Bochs "Shutdown" port 0x8900: Bochs quits at once, no ACPI needed. */
    if (ioperm(0x8900, 1, 1) == 0)
        for (const char *p = "Shutdown"; *p; p++)
            outb(*p, 0x8900);
    reboot(RB_POWER_OFF); /* fallback: ACPI S5 soft-off */
    for (;;)
        pause();
}

int main(void)
{
    mkdir("/dev", 0755);
    mkdir("/proc", 0755);
    mkdir("/sys", 0755);
    mkdir("/tmp", 01777);
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    mount("proc", "/proc", "proc", 0, NULL);
    mount("sysfs", "/sys", "sysfs", 0, NULL);
    int fd = open("/dev/ttyS0", O_RDWR | O_NOCTTY);
    if (fd < 0)
        fd = open("/dev/console", O_RDWR | O_NOCTTY);
    if (fd >= 0) {
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2)
            close(fd);
    }
    struct termios t; /* raw output: no \n -> \r\n mapping */
    if (tcgetattr(1, &t) == 0) {
        t.c_oflag &= ~OPOST;
        t.c_lflag &= ~ECHO;
        tcsetattr(1, TCSANOW, &t);
    }

    static char buf[1 << 16];
    static char *argv[1024];
    int n = 0, afd = open("/hy/args", O_RDONLY);
    ssize_t len = afd >= 0 ? read(afd, buf, sizeof buf - 1) : 0;
    if (len < 0)
        len = 0;
    for (ssize_t i = 0; i < len && n < 1023; i += strlen(buf + i) + 1)
        argv[n++] = buf + i;
    if (n == 0)
        argv[n++] = "/hy/prog";
    argv[n] = NULL;
    char *envp[] = {"PATH=/hy:/bin", "HOME=/tmp", "TMPDIR=/tmp", "TERM=dumb", NULL};

    char line[128];
    say("HY_BEGIN\n");
    pid_t pid = fork();
    if (pid == 0) {
        chdir("/hy");
        execve("/hy/prog", argv, envp);
        perror("hy-init: execve /hy/prog");
        _exit(127);
    }
    int st = 0, code;
    while (waitpid(pid, &st, 0) < 0) {
    }
    if (WIFEXITED(st))
        code = WEXITSTATUS(st);
    else {
        code = 128 + WTERMSIG(st);
        snprintf(line, sizeof line, "\nhy-init: program killed by signal %d (%s)\n", WTERMSIG(st),
                 strsignal(WTERMSIG(st)));
        say(line);
    }
    /* Leading newline: marker must start a line even if the program's output didn't end with one. */
    snprintf(line, sizeof line, "\nHY_EXIT=%d\n", code);
    say(line);
    tcdrain(1);
    power_off();
    return 0;
}
