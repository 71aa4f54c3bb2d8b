/* One per-thread error message for the tool's support code (file I/O, device memory), in the
 * style of ltk_last_error(): functions return an ltk_status and leave the details here. */
#ifndef LTK_TOOLS_ERR_H
#define LTK_TOOLS_ERR_H

#include "litetopk.h"

/* Records a formatted message and returns `status`. */
ltk_status tool_fail(ltk_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The last message recorded on this thread ("" if none). */
const char *tool_last_error(void);
void tool_clear_error(void);

#endif
