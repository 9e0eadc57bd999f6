/* place.h - where the weights of a loaded model live: the checkpoint mapping, or one anonymous arena.
 *
 * Load formats (names after llama.cpp's --no-mmap / vLLM's --load-format):
 * - HY_LOAD_MMAP: weight matrices point into the mmapped safetensors (zero-copy, instant load; the
 *   kernel maps what it can of the page cache in 2 MiB folios, the rest in 4 KiB pages).
 * - HY_LOAD_COPY: every weight matrix (hy_tensor data and MX scales) is copied into one 2 MiB-aligned
 *   anonymous arena advised MADV_HUGEPAGE, the tensors are repointed, and the checkpoint files are
 *   unmapped, so resident memory stays about the file size and all weights sit in huge pages when
 *   the kernel has them.
 * The math is identical either way (same bytes, same kernels). Copy is the default (faster decode:
 * docs/tuning.md); it falls back to mmap, with a warning, when the checkpoint is larger than
 * 90% of MemAvailable.
 */
#ifndef HY_MODEL_PLACE_H
#define HY_MODEL_PLACE_H

#include <stdint.h>

struct hy_model;

enum hy_load_format {
    HY_LOAD_MMAP = 0,
    HY_LOAD_COPY = 1,
};

/* What placement did (struct hy_model.place). Byte counts in bytes, times in seconds. */
struct hy_placement {
    enum hy_load_format format; /* format applied */
    int64_t bytes;              /* weight bytes copied into the arena (0 for mmap) */
    double seconds;             /* wall time of the copy + unmap */
    int64_t anon_huge;          /* AnonHugePages of the process after placement (-1 unknown) */
    int64_t rss_before;         /* VmRSS before / after placement (-1 unknown) */
    int64_t rss_after;
};

/* "mmap" | "copy" -> *out. Returns 0, or -1 with hy_err_msg() naming the accepted values. */
int hy_load_format_parse(const char *s, enum hy_load_format *out);
const char *hy_load_format_name(enum hy_load_format f);

/* The format hy_model_load applies when none is given (hy_load_params): HYINFER_LOAD_FORMAT=mmap|copy
 * (base/env.h), else the built-in default (see place.c). */
enum hy_load_format hy_load_format_default(void);

/* Applies format f to a model bound by hy_model_load (called by it with hy_load_format_default()).
 * HY_LOAD_COPY: copies the weight matrices (only ranges inside the checkpoint mappings) into the
 * arena (owned by the model, freed by hy_model_free), repoints every hy_tensor, repoints the
 * checkpoint's tensor index where a tensor's bytes were copied and sets the others' data to NULL,
 * and unmaps the checkpoint files (ck.files[i].map becomes empty). Once copied, further calls do
 * nothing. When the arena cannot be allocated (or the checkpoint exceeds 90% of MemAvailable) the
 * weights stay mmapped with a warning and place.format says mmap. Returns 0 (kept returning int
 * so that a future placement that can fail halfway has a way to say so). */
int hy_model_place(struct hy_model *m, enum hy_load_format f);

/* Unmaps the arena (hy_model_free calls it); safe when there is none. */
void hy_model_place_release(struct hy_model *m);

/* VmRSS of this process in bytes from /proc/self/status, -1 when unavailable. */
int64_t hy_proc_rss_bytes(void);

/* AnonHugePages of this process in bytes from /proc/self/smaps_rollup, -1 when unavailable. */
int64_t hy_proc_anon_huge_bytes(void);

/* FilePmdMapped of this process (file pages mapped as 2 MiB pages: page-cache large folios), bytes
 * from /proc/self/smaps_rollup, -1 when unavailable. */
int64_t hy_proc_file_pmd_bytes(void);

#endif
