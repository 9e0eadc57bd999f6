/* dataset.h - the prompts of an offline run (`hyinfer run --yaml`), per data_config.
 *
 * data_config.dataset selects the source:
 *   default        data_config.dataset_path when set, else data/prompts_default.json of the repo.
 *                  The file is a JSON array of non-empty strings, one prompt each.
 *   LongBench      data_config.dataset_path: JSON Lines, one object per line with string fields
 *                  "context" and "input" (required) and "answers" (optional: a string or an array
 *                  of strings); other fields are ignored.
 *   InfiniteBench  the same, with the reference field named "answer".
 * Blank lines in .jsonl files are skipped. LongBench / InfiniteBench records become prompts
 * through HY_DATASET_QA_TEMPLATE. Prompts are raw text; the chat template (apply_chat_template)
 * and the token-level truncation (input_truncated_len) are applied later, by the run loop, after
 * tokenization.
 */
#ifndef HY_CLI_DATASET_H
#define HY_CLI_DATASET_H

#include <stddef.h>

struct hy_run_config;

/* The question-answering / summarization template for LongBench and InfiniteBench records:
 * printf format, first %s = the record's "context", second %s = its "input". I.e.
 *   {context}\n\nNow, answer the question based on the text above.\nQuestion: {input}\nAnswer: */
#define HY_DATASET_QA_TEMPLATE "%s\n\nNow, answer the question based on the text above.\nQuestion: %s\nAnswer:"

/* Repo-relative location of the bundled default prompts. */
#define HY_DATASET_DEFAULT_FILE "data/prompts_default.json"

struct hy_dataset {
    char **prompts;    /* [n] malloc'd NUL-terminated UTF-8 strings */
    char **references; /* [n] the first reference answer of each record, or NULL entries
                           (always NULL entries for the default dataset) */
    size_t n;          /* >= 1 after a successful load */
    char *source;      /* the file the prompts came from */
};

/* Loads the prompts cfg->dataset / cfg->dataset_path select (dataset_path is used as the config
 * loader resolved it). For `default` without dataset_path, data/prompts_default.json is searched
 * for under, in order: root, root/.., $HYINFER_ROOT, cfg->config_dir/.., cfg->config_dir, the
 * current directory (root may be NULL: the repo root or the YAML's directory).
 * Returns 0 and fills *out (free with hy_dataset_free), or -1 with hy_err_msg() naming the file,
 * the line (jsonl) or element index (JSON array), and the problem; *out is then empty. */
int hy_dataset_load(const struct hy_run_config *cfg, const char *root, struct hy_dataset *out);

/* Loads a JSON array of prompt strings (the `default` format). Same contract as above. */
int hy_dataset_load_prompt_array(const char *path, struct hy_dataset *out);

/* Loads a LongBench/InfiniteBench-style .jsonl file; answer_field is "answers" or "answer".
 * Same contract as above. */
int hy_dataset_load_qa_jsonl(const char *path, const char *answer_field, struct hy_dataset *out);

void hy_dataset_free(struct hy_dataset *ds);

#endif
