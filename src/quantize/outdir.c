/* outdir.c - the output directory of hyinfer quantize: checks before any work, the files copied
 * beside the new weights, clean-up of a failed run (outdir.h). */
#include "quantize/outdir.h"

#include "base/err.h"
#include "base/fileio.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb");
    if (!a)
        return hy_err_set("%s: cannot open: %s", from, strerror(errno));
    FILE *b = fopen(to, "wb");
    if (!b) {
        fclose(a);
        return hy_err_set("%s: cannot create: %s", to, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(buf, 1, sizeof(buf), a)) > 0)
        if (fwrite(buf, 1, n, b) != n)
            rc = hy_err_set("%s: write failed: %s", to, strerror(errno));
    if (!rc && ferror(a))
        rc = hy_err_set("%s: read failed", from);
    fclose(a);
    if (fclose(b) && !rc)
        rc = hy_err_set("%s: close failed: %s", to, strerror(errno));
    return rc;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Removes the regular files of dir and dir itself (only what quantize wrote there). */
void hy_quantize_remove_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            char *p = hy_path_join(dir, de->d_name);
            if (p)
                unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* 0 if path does not exist (*exists = 0) or is an empty directory (*exists = 1); else error. */
int hy_quantize_check_out_dir(const char *path, int *exists)
{
    struct stat sb;
    *exists = 0;
    if (stat(path, &sb) != 0)
        return errno == ENOENT ? 0 : hy_err_set("%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return hy_err_set("output %s exists and is not a directory", path);
    DIR *d = opendir(path);
    if (!d)
        return hy_err_set("%s: %s", path, strerror(errno));
    struct dirent *de;
    int empty = 1;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            empty = 0;
    closedir(d);
    if (!empty)
        return hy_err_set("output directory %s exists and is not empty (refusing to overwrite)", path);
    *exists = 1;
    return 0;
}

/* 0 unless OUT (which need not exist yet) is IN itself or lies inside IN: the output would land in
 * the input checkpoint (its temporary directory would even be copied as one of IN's other files). */
int hy_quantize_check_out_not_in(const char *in_dir, const char *out_dir)
{
    char *in = realpath(in_dir, NULL);
    if (!in)
        return 0; /* reported later, when IN is opened */
    size_t ol = strlen(out_dir);
    while (ol > 1 && out_dir[ol - 1] == '/')
        ol--;
    char *o = strndup(out_dir, ol), *parent = NULL;
    int rc = 0;
    if (!o) {
        free(in);
        return hy_err_set("out of memory");
    }
    char *slash = strrchr(o, '/');
    const char *base = slash ? slash + 1 : o;
    if (slash == o)
        parent = realpath("/", NULL);
    else {
        if (slash)
            *slash = 0;
        parent = realpath(slash ? o : ".", NULL);
    }
    if (parent) {
        size_t il = strlen(in), pl = strlen(parent);
        char *full = malloc(pl + strlen(base) + 2);
        if (!full)
            rc = hy_err_set("out of memory");
        else {
            sprintf(full, "%s%s%s", parent, pl > 1 ? "/" : "", base);
            /* OUT is IN, or below it (IN = "/" contains everything) */
            if (!strcmp(full, in) || (!strncmp(full, in, il) && (il == 1 || full[il] == '/')))
                rc = hy_err_set("output %s is the input directory %s or inside it: choose an OUT_DIR outside IN_DIR",
                                out_dir, in_dir);
            free(full);
        }
    }
    free(parent);
    free(o);
    free(in);
    return rc;
}

int hy_quantize_copy_other_files(const char *in, const char *tmp, int64_t *n)
{
    DIR *d = opendir(in);
    if (!d)
        return hy_err_set("%s: %s", in, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        const char *nm = de->d_name;
        if (nm[0] == '.' || !strcmp(nm, "config.json") || ends_with(nm, ".safetensors") ||
            !strcmp(nm, "model.safetensors.index.json"))
            continue;
        char *src = hy_path_join(in, nm), *dst = hy_path_join(tmp, nm);
        struct stat sb;
        if (!src || !dst)
            rc = hy_err_set("out of memory");
        else if (stat(src, &sb) == 0 && S_ISREG(sb.st_mode)) {
            rc = copy_file(src, dst);
            (*n)++;
        } else {
            hy_log_warn("quantize: %s is not a regular file; not copied", src);
        }
        free(src);
        free(dst);
    }
    closedir(d);
    return rc;
}

int hy_quantize_check_out(const char *in_dir, const char *out_dir)
{
    int exists;
    if (hy_quantize_check_out_dir(out_dir, &exists) || hy_quantize_check_out_not_in(in_dir, out_dir))
        return -1;
    /* the temporary sibling is created in OUT's parent: it must be a directory we can write */
    char *par = strdup(out_dir);
    if (!par)
        return hy_err_set("out of memory");
    size_t l = strlen(par);
    while (l > 1 && par[l - 1] == '/')
        par[--l] = '\0';
    char *slash = strrchr(par, '/');
    const char *dir = slash ? (slash == par ? "/" : (*slash = '\0', par)) : ".";
    struct stat sb;
    int rc = 0;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        rc = hy_err_set("output %s: its parent directory %s does not exist", out_dir, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = hy_err_set("output %s: cannot write into %s: %s", out_dir, dir, strerror(errno));
    free(par);
    return rc;
}
