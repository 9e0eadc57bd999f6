/* outdir.h - the output directory of hyinfer quantize (internal to src/quantize; the public check is
 * hy_quantize_check_out). Every function returns 0, or -1 with hy_err_msg() naming the
 * path and the problem. */
#ifndef HY_QUANTIZE_OUTDIR_H
#define HY_QUANTIZE_OUTDIR_H

#include <stdint.h>

/* 0 if path does not exist (*exists = 0) or is an empty directory (*exists = 1); else an error. */
int hy_quantize_check_out_dir(const char *path, int *exists);

/* 0 unless out_dir (which need not exist yet) is in_dir itself or lies inside it (the output would
 * land in the input checkpoint). */
int hy_quantize_check_out_not_in(const char *in_dir, const char *out_dir);

/* Copies the files of in other than the weights and config.json (tokenizer, chat template,
 * generation config, licence, ...) into tmp; *n = how many. */
int hy_quantize_copy_other_files(const char *in, const char *tmp, int64_t *n);

/* Removes the regular files of dir and dir itself (only what quantize wrote there). */
void hy_quantize_remove_tmp(const char *dir);

/* The checks hy_quantize_model makes of out_dir first (not a non-empty directory or a file, not inside
 * in_dir), for callers with slow work to do before it (calibration). 0, or -1 with hy_err_msg(). */
int hy_quantize_check_out(const char *in_dir, const char *out_dir);

#endif
