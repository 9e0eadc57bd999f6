/* safetensors.h - mmap'd safetensors files and sharded checkpoints (model.safetensors.index.json).
 *
 * Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets
 * [begin, end)}, "__metadata__": {...}}, then the data region. Every offset, size and shape is
 * checked against the file before any tensor is handed out; tensors point into the mapping
 * (zero-copy) and live as long as the checkpoint.
 */
#ifndef HY_MODEL_SAFETENSORS_H
#define HY_MODEL_SAFETENSORS_H

#include "base/fileio.h"
#include "quant/dtype.h"

#include <stddef.h>
#include <stdint.h>

#define HY_ST_MAX_DIMS 8

struct hy_st_tensor {
    char *name;
    enum hy_dtype dtype; /* HY_DTYPE_UNKNOWN when the dtype string is not one we know */
    char dtype_name[16]; /* as written in the header */
    int ndim;
    int64_t shape[HY_ST_MAX_DIMS];
    const void *data; /* into the mapping */
    size_t nbytes;
    int file_index; /* which shard */
};

struct hy_st_file {
    char *path;
    struct hy_mapped_file map;
    struct hy_st_tensor *tensors;
    size_t n_tensors;
};

/* Parses a safetensors image held in memory (buf[size], e.g. a mapping). `label` names the file in
 * errors. Tensors point into buf. Returns 0, or -1 with hy_err_msg() saying what lies (bad header
 * length, invalid JSON, offsets outside the data, size != numel*dtype size, overlapping data ...).
 * Free with hy_st_file_free (which does not unmap when map.data is NULL). */
int hy_st_parse(const void *buf, size_t size, const char *label, struct hy_st_file *out);

/* mmaps and parses one file. */
int hy_st_open(const char *path, struct hy_st_file *out);
void hy_st_file_free(struct hy_st_file *f);

/* A checkpoint: one model.safetensors, or the shards named by model.safetensors.index.json. */
struct hy_checkpoint {
    struct hy_st_file *files;
    size_t n_files;
    struct hy_st_tensor **index; /* all tensors, sorted by name */
    size_t n_index;
    uint64_t total_bytes;
};

/* Opens <dir>/model.safetensors.index.json (weight_map) or <dir>/model.safetensors (or the only
 * *.safetensors file). Duplicate tensor names across shards are an error. Returns 0 or -1. */
int hy_checkpoint_open(const char *dir, struct hy_checkpoint *ck);
void hy_checkpoint_close(struct hy_checkpoint *ck);

/* Tensor by exact name, or NULL. */
const struct hy_st_tensor *hy_checkpoint_find(const struct hy_checkpoint *ck, const char *name);

#endif
