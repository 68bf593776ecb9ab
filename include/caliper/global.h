/* caliper — the library's process-wide setup, done once and explicitly.
 *
 * cal_global_init initialises what libcaliper shares across the process:
 * libcurl's global state (curl_global_init) and the C locale object that
 * every number parse and print in the library uses (so "2.5" reads and
 * prints the same under any LC_NUMERIC the host program set). Call it from
 * main before starting threads; calling it again is a no-op returning the
 * first result. The library calls it itself on first use of HTTP (probe,
 * target, proxy, tokenizer), so a program that forgets still works, but
 * libcurl's global init is then done from whichever thread gets there first.
 *
 * libcaliper changes nothing else process-wide on its own: the child
 * subreaper, the engine's death signal and the open-files limit are options
 * (cal_target_config.subreaper, .death_signal; cal_probe_config.raise_nofile)
 * that the caller turns on. */
#ifndef CALIPER_GLOBAL_H
#define CALIPER_GLOBAL_H

/* CAL_OK, or CAL_EINTERNAL when libcurl's global init failed. Thread-safe. */
int cal_global_init(void);

#endif
