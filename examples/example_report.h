/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How the example programs and benchmark drivers report a failed BMI call: what they were
 * doing, to which address, the error's name and meaning, and a hint where the usual cause is
 * known. One place, so every program says it the same way. */
#ifndef EXAMPLE_REPORT_H
#define EXAMPLE_REPORT_H

#include <stdio.h>

#include "bmi.h"

/* The usual cause of each code when talking to an address ("%s" is the address). */
static const struct
{
    int code;
    const char *format;
} example_hints[] = {
    {BMI_ECONNREFUSED, "is a server running at %s? nothing accepted the connection there, "
                       "or it refused it (a warning here or in its log says why, e.g. it "
                       "ran out of file descriptors)"},
    {BMI_ECONNRESET, "is a server running at %s? nothing accepted the connection there, or "
                     "the server closed it or restarted (a request it had not answered is "
                     "lost then; send it again)"},
    {BMI_ENOPROTOOPT, "%s needs a method this process did not start: give it in the method "
                      "list, and check that libbmi was built with it (bmi-info lists them)"},
    {BMI_EPROTONOSUPPORT, "%s needs a method this process did not start: give it in the "
                          "method list, and check that libbmi was built with it"},
    {BMI_EHOSTNTFD, "the host of %s does not resolve here"},
    {BMI_EHOSTUNREACH, "%s is not reachable from here; with an allocation in force only its "
                       "planes are (bmi-info shows them)"},
    {BMI_ENETUNREACH, "%s is not reachable from here; with an allocation in force only its "
                      "planes are (bmi-info shows them)"},
    {BMI_EACCES, "%s admits only holders of its key: give this process the same key "
                 "(BMI_KEY_FILE)"},
    {BMI_EADDRINUSE, "another process already listens at %s"},
    {BMI_EINVAL, "is %s well formed? tcp://HOST:PORT, shm://NAME, "
                 "verbs://DEVICE:PORT/HOST:PORT or ofi+PROVIDER://...; or a warning above "
                 "names a setting that is not valid"},
};

/* The timeout_ms of a code that came from libbmi: no deadline of the caller's passed. */
#define EXAMPLE_FROM_LIBRARY 0

/* The usual cause of code when talking to addr, written into out, or NULL if none is known.
 * timeout_ms is the caller's own deadline when that deadline passed (its -BMI_ETIMEDOUT), else
 * EXAMPLE_FROM_LIBRARY: an operation that failed with -BMI_ETIMEDOUT met one of libbmi's
 * deadlines, which the caller's option does not raise. */
static inline const char *example_hint(int code, const char *addr, int timeout_ms, char *out,
                                       size_t size)
{
    size_t i;
    if (code < 0)
        code = -code;
    if (addr == NULL)
        addr = "the address";
    if (code == BMI_ETIMEDOUT && timeout_ms > 0) {
        snprintf(out, size, "no answer from %s within %d ms (--timeout-ms raises the limit)", addr,
                 timeout_ms);
        return out;
    }
    if (code == BMI_ETIMEDOUT) {
        snprintf(out, size,
                 "no answer from %s within one of libbmi's own deadlines, which --timeout-ms "
                 "does not raise (bmi-info lists the *_timeout_ms settings that do)",
                 addr);
        return out;
    }
    for (i = 0; i < sizeof(example_hints) / sizeof(example_hints[0]); i++) {
        if (example_hints[i].code == code) {
            snprintf(out, size, example_hints[i].format, addr);
            return out;
        }
    }
    return NULL;
}

/* "who: doing addr failed: BMI_ECONNREFUSED (Connection refused)", then the hint if any;
 * timeout_ms as for example_hint. */
static inline void example_report(const char *who, const char *doing, const char *addr, int code,
                                  int timeout_ms)
{
    char hint[320];
    const char *why = example_hint(code, addr, timeout_ms, hint, sizeof(hint));
    fprintf(stderr, "%s: %s%s%s failed: %s (%s)\n", who, doing, addr ? " " : "", addr ? addr : "",
            bmi_status_string(code), bmi_status_meaning(code));
    if (why != NULL)
        fprintf(stderr, "%s: hint: %s\n", who, why);
}

#endif /* EXAMPLE_REPORT_H */
