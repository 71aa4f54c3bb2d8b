/* Temporary: the cpu backend forwards to ref until the fused CPU backend lands. */
#include "../ltk-impl.h"
static int cpu_available(void) { return 1; }
const ltk_backend_i ltk_backend_cpu = {
    "cpu", cpu_available, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};
