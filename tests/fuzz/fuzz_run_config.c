/* fuzz_run_config.c - libFuzzer target: the YAML run-config loader must reject any input with an
 * error message, never crash or leak. */
#include "base/err.h"
#include "config/run_config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/hy_fuzz_yaml_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    struct hy_run_config cfg;
    if (hy_run_config_load(path, &cfg) == 0)
        hy_run_config_free(&cfg);
    else if (hy_err_msg()[0] == '\0')
        abort(); /* every failure must say why */
    unlink(path);
    return 0;
}
