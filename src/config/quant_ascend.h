/* quant_ascend.h - the Ascend (msModelSlim) quant_model_description.json (internal to src/config; rules in
 * quant_config.h and specs/ascend_w8a8.md §1). */
#ifndef HY_CONFIG_QUANT_ASCEND_H
#define HY_CONFIG_QUANT_ASCEND_H

#include "config/quant_config.h"

/* Parses the description file at path into qc (method HY_QM_ASCEND, groups 0 = W8A8_DYNAMIC, 1 = W8A8).
 * Returns 0, or -1 with hy_err_msg() naming the file and the entry. */
int hy_quant_ascend_load(const char *path, struct hy_quant_config *qc);

/* The format of a linear module: the type of "<module>.weight" (or of "<module>" for a stacked tensor).
 * Returns the hy_qformat (group 0 / 1 for the int8 types, -1 for FLOAT); HY_QF_NONE with group
 * HY_QGROUP_UNDESCRIBED when the description has no entry for it. */
int hy_quant_ascend_lookup(const struct hy_quant_config *qc, const char *module, int *group);

#endif
