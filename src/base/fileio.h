/* fileio.h - whole-file reads and read-only mappings. */
#ifndef HY_BASE_FILEIO_H
#define HY_BASE_FILEIO_H

#include <stddef.h>

/* Reads the whole file into a malloc'd buffer with a trailing NUL (not counted in *len).
 * Returns 0, or -1 with hy_err_msg() naming the path and the OS error. Caller frees *data. */
int hy_file_read_all(const char *path, char **data, size_t *len);

/* A read-only, private mmap of a whole file. */
struct hy_mapped_file {
    void *data;  /* NULL for an empty file */
    size_t size; /* bytes */
};

/* Maps `path` read-only. Returns 0, or -1 with hy_err_msg() set. Release with hy_file_unmap. */
int hy_file_map(const char *path, struct hy_mapped_file *out);
void hy_file_unmap(struct hy_mapped_file *m);

/* 1 if `path` exists and is a regular file, else 0. */
int hy_file_exists(const char *path);

/* Joins dir and name with one '/', into a malloc'd string (NULL on OOM). */
char *hy_path_join(const char *dir, const char *name);

#endif
