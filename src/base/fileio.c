#include "base/fileio.h"

#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int hy_file_read_all(const char *path, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return hy_err_set("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return hy_err_set("%s: out of memory", path);
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return hy_err_set("%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return hy_err_set("%s: read error", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int hy_file_map(const char *path, struct hy_mapped_file *out)
{
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return hy_err_set("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return hy_err_set("%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return hy_err_set("%s: mmap failed: %s", path, strerror(errno));
        }
        out->data = p;
        out->size = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

void hy_file_unmap(struct hy_mapped_file *m)
{
    if (m->data)
        munmap(m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int hy_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *hy_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (k > 0 && p[k - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}
