/* test_server_openai.c - OpenAI request parsing/validation (types, ranges, defaults), the context
 * check's vLLM wording, error bodies, lossy UTF-8 strings, and the Prometheus rendering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/metrics.h"
#include "server/openai.h"

static struct hy_oai_limits lim(void)
{
    struct hy_oai_limits l;
    l.max_model_len = 256;
    l.vocab_size = 480;
    hy_sampling_params_init(&l.defaults);
    l.defaults.temperature = 0.7f;
    return l;
}

static int parse(enum hy_oai_kind k, const char *body, struct hy_oai_request *r, struct hy_oai_error *e)
{
    struct hy_oai_limits l = lim();
    memset(e, 0, sizeof(*e));
    return hy_oai_parse(k, body, strlen(body), &l, r, e);
}

static void expect_400(enum hy_oai_kind k, const char *body, const char *param, const char *msg_part)
{
    struct hy_oai_request r;
    struct hy_oai_error e;
    int rc = parse(k, body, &r, &e);
    if (rc == 0) {
        hy_oai_request_free(&r);
        fail_msg("accepted: %s", body);
    }
    assert_int_equal(e.status, 400);
    if (param)
        assert_string_equal(e.param, param);
    if (!strstr(e.message, msg_part))
        fail_msg("message \"%s\" lacks \"%s\" (body %s)", e.message, msg_part, body);
}

static void test_chat_ok(void **st)
{
    (void)st;
    struct hy_oai_request r;
    struct hy_oai_error e;
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":12,"
                       "\"temperature\":1,\"top_p\":0.9,\"top_k\":5,\"min_p\":0.1,\"seed\":-3,\"stop\":\"x\","
                       "\"stop_token_ids\":[1,2],\"n\":3,\"logprobs\":true,\"top_logprobs\":4,\"stream\":true,"
                       "\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true,\"unknown_field\":[1],"
                       "\"chat_template_kwargs\":{\"reasoning_effort\":\"high\"}}";
    assert_int_equal(parse(HY_OAI_CHAT, body, &r, &e), 0);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.max_tokens, 12);
    assert_int_equal(r.sp.max_new_tokens, 12);
    assert_true(r.sp.temperature == 1.0f);
    assert_true(r.sp.top_p == 0.9f);
    assert_int_equal(r.sp.top_k, 5);
    assert_true(r.sp.has_seed);
    assert_true(r.sp.seed == (uint64_t)-3);
    assert_int_equal(r.n_stop, 1);
    assert_string_equal(r.stop[0], "x");
    assert_int_equal(r.n_stop_token_ids, 2);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.logprobs, 4);
    assert_true(r.stream && r.include_usage && r.sp.ignore_eos);
    assert_string_equal(json_string_value(json_object_get(r.template_kwargs, "reasoning_effort")), "high");
    assert_true(json_is_true(json_object_get(r.template_kwargs, "add_generation_prompt")));
    hy_oai_request_free(&r);

    /* OpenAI's reasoning_effort levels map onto the template's; chat_template_kwargs wins */
    static const char *const effort_map[][2] = {{"none", "no_think"}, {"minimal", "low"}, {"medium", "high"},
                                                {"xhigh", "high"},    {"low", "low"},     {"no_think", "no_think"}};
    for (size_t i = 0; i < sizeof(effort_map) / sizeof(effort_map[0]); i++) {
        char b[256];
        snprintf(b, sizeof(b), "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"%s\"}",
                 effort_map[i][0]);
        assert_int_equal(parse(HY_OAI_CHAT, b, &r, &e), 0);
        assert_string_equal(json_string_value(json_object_get(r.template_kwargs, "reasoning_effort")),
                            effort_map[i][1]);
        hy_oai_request_free(&r);
    }
    assert_int_equal(parse(HY_OAI_CHAT,
                           "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"reasoning_effort\":\"high\","
                           "\"chat_template_kwargs\":{\"reasoning_effort\":\"no_think\"}}",
                           &r, &e),
                     0);
    assert_string_equal(json_string_value(json_object_get(r.template_kwargs, "reasoning_effort")), "no_think");
    hy_oai_request_free(&r);

    /* defaults come from the limits; max_completion_tokens works too */
    assert_int_equal(parse(HY_OAI_CHAT,
                           "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
                           "\"text\":\"a\"}]}],\"max_completion_tokens\":7}",
                           &r, &e),
                     0);
    assert_null(r.model);
    assert_true(r.sp.temperature == 0.7f);
    assert_int_equal(r.max_tokens, 7);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.logprobs, -1);
    assert_false(r.stream);
    hy_oai_request_free(&r);
}

static void test_completion_ok(void **st)
{
    (void)st;
    struct hy_oai_request r;
    struct hy_oai_error e;
    assert_int_equal(parse(HY_OAI_COMPLETION, "{\"prompt\":\"Once\",\"logprobs\":2,\"stop\":[\"a\",\"bb\"]}", &r, &e),
                     0);
    assert_string_equal(r.prompt_text, "Once");
    assert_int_equal(r.logprobs, 2);
    assert_int_equal(r.n_stop, 2);
    assert_int_equal(r.max_tokens, -1);
    hy_oai_request_free(&r);
    assert_int_equal(parse(HY_OAI_COMPLETION, "{\"prompt\":[3,4,479]}", &r, &e), 0);
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 479);
    hy_oai_request_free(&r);
    assert_int_equal(parse(HY_OAI_COMPLETION, "{\"prompt\":[\"single\"]}", &r, &e), 0);
    assert_string_equal(r.prompt_text, "single");
    hy_oai_request_free(&r);
}

static void test_errors(void **st)
{
    (void)st;
    expect_400(HY_OAI_CHAT, "{\"messages\":[", NULL, "Invalid JSON");
    expect_400(HY_OAI_CHAT, "[1,2]", NULL, "JSON object");
    expect_400(HY_OAI_CHAT, "{}", "messages", "required");
    expect_400(HY_OAI_CHAT, "{\"messages\":[]}", "messages", "empty");
    expect_400(HY_OAI_CHAT, "{\"messages\":\"hi\"}", "messages", "list");
    expect_400(HY_OAI_CHAT, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", "messages", "wizard");
    expect_400(HY_OAI_CHAT, "{\"messages\":[{\"content\":\"x\"}]}", "messages", "role");
    const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char b[512];
#define E(extra, param, part)                                                                                          \
    snprintf(b, sizeof(b), "{%s,%s}", m, extra);                                                                       \
    expect_400(HY_OAI_CHAT, b, param, part)
    E("\"temperature\":\"hot\"", "temperature", "number");
    E("\"temperature\":-1", "temperature", "[0, 100]");
    E("\"top_p\":0", "top_p", "(0, 1]");
    E("\"top_p\":1.5", "top_p", "(0, 1]");
    E("\"top_k\":-2", "top_k", "top_k");
    E("\"top_k\":1.5", "top_k", "integer");
    E("\"min_p\":2", "min_p", "min_p");
    E("\"presence_penalty\":3", "presence_penalty", "[-2, 2]");
    E("\"frequency_penalty\":-2.5", "frequency_penalty", "[-2, 2]");
    E("\"repetition_penalty\":0", "repetition_penalty", "repetition_penalty");
    E("\"max_tokens\":0", "max_tokens", "at least 1");
    E("\"max_tokens\":\"5\"", "max_tokens", "integer");
    E("\"max_tokens\":100000", "max_tokens", "maximum context length is 256");
    E("\"n\":0", "n", "'n'");
    E("\"n\":99", "n", "'n'");
    E("\"stop\":5", "stop", "stop");
    E("\"stop\":[\"a\",1]", "stop", "stop");
    E("\"stop_token_ids\":[1,480]", "stop_token_ids", "out of vocabulary");
    E("\"stream\":\"yes\"", "stream", "boolean");
    E("\"stream_options\":{\"include_usage\":true}", "stream_options", "stream");
    E("\"logprobs\":1", "logprobs", "boolean");
    E("\"top_logprobs\":21,\"logprobs\":true", "top_logprobs", "top_logprobs");
    E("\"top_logprobs\":3", "top_logprobs", "requires");
    E("\"seed\":\"x\"", "seed", "integer");
    E("\"reasoning_effort\":\"max\"", "reasoning_effort", "minimal");
    E("\"reasoning_effort\":3", "reasoning_effort", "must be one of");
    E("\"chat_template_kwargs\":[]", "chat_template_kwargs", "object");
    E("\"ignore_eos\":1", "ignore_eos", "boolean");
    E("\"model\":5", "model", "string");
#undef E
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":\"\"}", "prompt", "empty");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":[]}", "prompt", "empty");
    expect_400(HY_OAI_COMPLETION, "{}", "prompt", "required");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":[1,-1]}", "prompt", "out of vocabulary");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":[1,480]}", "prompt", "out of vocabulary");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", "prompt", "one prompt");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":5}", "prompt", "string");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs", "integer");
    expect_400(HY_OAI_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":30}", "logprobs", "[0, 20]");
}

static void test_context_check(void **st)
{
    (void)st;
    struct hy_oai_error e;
    assert_int_equal(hy_oai_check_context(10, 20, 256, HY_OAI_CHAT, &e), 0);
    assert_int_equal(hy_oai_check_context(10, -1, 256, HY_OAI_CHAT, &e), 0);
    assert_int_equal(hy_oai_check_context(300, -1, 256, HY_OAI_COMPLETION, &e), -1);
    assert_int_equal(e.status, 400);
    assert_non_null(strstr(e.message, "Input length 300 exceeds the model's maximum context length 256"));
    assert_non_null(strstr(e.message, "This model's maximum context length is 256 tokens. However, you requested 300"));
    assert_int_equal(hy_oai_check_context(250, 10, 256, HY_OAI_CHAT, &e), -1);
    assert_non_null(strstr(e.message, "you requested 260 tokens (250 in the messages, 10 in the completion)"));
    assert_int_equal(hy_oai_check_context(0, 10, 256, HY_OAI_CHAT, &e), -1);
}

static void test_error_json(void **st)
{
    (void)st;
    struct hy_oai_error e;
    hy_oai_error_set(&e, 404, "model", "The model `x` does not exist.");
    char *s = hy_oai_error_json(&e);
    json_t *j = json_loads(s, 0, NULL);
    json_t *err = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(err, "message")), "The model `x` does not exist.");
    assert_string_equal(json_string_value(json_object_get(err, "type")), "NotFoundError");
    assert_string_equal(json_string_value(json_object_get(err, "param")), "model");
    assert_int_equal(json_integer_value(json_object_get(err, "code")), 404);
    json_decref(j);
    free(s);
    /* lossy strings: invalid bytes become U+FFFD, valid multibyte kept */
    json_t *t = hy_oai_json_string_lossy("a\xff\xe4\xbd\xa0\xe4\xbd", 7);
    assert_non_null(t);
    assert_string_equal(json_string_value(t), "a\xEF\xBF\xBD\xe4\xbd\xa0\xEF\xBF\xBD\xEF\xBF\xBD");
    json_decref(t);
}

static void test_metrics(void **st)
{
    (void)st;
    struct hy_server_metrics m;
    hy_server_metrics_init(&m);
    hy_histogram_observe(&m.ttft, 0.003);
    hy_histogram_observe(&m.ttft, 0.5);
    hy_histogram_observe(&m.ttft, 1000);
    m.requests_ok[0] = 2;
    struct hy_engine_stats es;
    memset(&es, 0, sizeof(es));
    es.num_running = 3;
    es.prefix_queries = 100;
    es.prefix_hits = 25;
    es.num_preemptions = 7;
    es.max_batch_seqs = 8;
    struct hy_sbuf o = {0};
    assert_int_equal(hy_metrics_render(&m, &es, "hy\"3", &o), 0);
    assert_non_null(strstr(o.p, "vllm:num_requests_running{model_name=\"hy\\\"3\"} 3\n"));
    assert_non_null(strstr(o.p, "hyinfer:prefix_cache_hit_rate{model_name=\"hy\\\"3\"} 0.25\n"));
    assert_non_null(strstr(o.p, "vllm:num_preemptions_total{model_name=\"hy\\\"3\"} 7\n"));
    assert_non_null(strstr(o.p, "hyinfer:max_batch_seqs{model_name=\"hy\\\"3\"} 8\n"));
    /* cumulative buckets */
    assert_non_null(strstr(o.p, "vllm:time_to_first_token_seconds_bucket{model_name=\"hy\\\"3\",le=\"0.001\"} 0\n"));
    assert_non_null(strstr(o.p, "vllm:time_to_first_token_seconds_bucket{model_name=\"hy\\\"3\",le=\"0.005\"} 1\n"));
    assert_non_null(strstr(o.p, "vllm:time_to_first_token_seconds_bucket{model_name=\"hy\\\"3\",le=\"0.5\"} 2\n"));
    assert_non_null(strstr(o.p, "vllm:time_to_first_token_seconds_bucket{model_name=\"hy\\\"3\",le=\"80.0\"} 2\n"));
    assert_non_null(strstr(o.p, "vllm:time_to_first_token_seconds_bucket{model_name=\"hy\\\"3\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(o.p, "vllm:time_to_first_token_seconds_count{model_name=\"hy\\\"3\"} 3\n"));
    assert_non_null(strstr(o.p, "finished_reason=\"stop\"} 2\n"));
    hy_sbuf_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_ok),       cmocka_unit_test(test_completion_ok), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_context_check), cmocka_unit_test(test_error_json),    cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
