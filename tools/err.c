#include "err.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char tool_errbuf[1024];

ltk_status tool_fail(ltk_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tool_errbuf, sizeof tool_errbuf, fmt, ap);
    va_end(ap);
    return status;
}

const char *tool_last_error(void) { return tool_errbuf; }

void tool_clear_error(void) { tool_errbuf[0] = '\0'; }
