/* tools_file.h - tool calling without the server: `generate --chat --tools FILE` and the run
 * YAML's data_config.tools_path. The file holds an OpenAI tools list ([{"type": "function",
 * "function": {...}}, ...]) or an object with such a "tools" list; the tools are rendered into the
 * chat prompt, and the output is split into reasoning, content and tool calls by the server's
 * parser (text/toolcall.h). */
#ifndef HY_CLI_TOOLS_FILE_H
#define HY_CLI_TOOLS_FILE_H

#include "text/tokenizer.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Reads and checks the tools file. Returns 0 and a new reference in *tools, or -1 with
 * hy_err_msg() naming the file and what is wrong. */
int hy_cli_load_tools(const char *path, json_t **tools);

/* The outcome of one chat generation with tools. */
struct hy_cli_tool_result {
    char *content;   /* malloc'd text outside reasoning and calls ("" when none) */
    char *reasoning; /* malloc'd, "" when none */
    json_t *calls;   /* [{"name", "arguments" (JSON text)}] (new reference); incomplete calls included */
    int n_complete;  /* calls closed by </tool_call> */
};

/* Decodes output ids[n] (think and tool markers kept as text) and parses them; start_in_reasoning:
 * the prompt ended inside an open think block. Returns 0, or -1 with hy_err_msg() (OOM). */
int hy_cli_tool_result(const struct hy_tokenizer *tok, const int32_t *ids, size_t n, const json_t *tools,
                       int start_in_reasoning, struct hy_cli_tool_result *r);

void hy_cli_tool_result_free(struct hy_cli_tool_result *r);

#endif
