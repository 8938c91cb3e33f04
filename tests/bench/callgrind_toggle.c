/* Callgrind's client requests, for the CPU gate (tests/bench/instructions.py).
 *
 * The requests are a magic instruction sequence that valgrind recognises and a native run
 * executes as a no-op, so they exist only as C macros (valgrind/callgrind.h); ctypes cannot
 * issue them, and this is the smallest thing that can. The broker process under callgrind
 * (tests/bench/instr_broker.py) loads it and calls these between the phases of the gate's
 * workload.
 *
 * Instrumentation is switched on once, after the broker's start and warm-up, and each phase
 * ends with a dump: a dump holds what ran since the previous one. Switching instrumentation
 * off and on between phases instead (it zeroes the threads' state) gave counts of the wrong
 * size, even wrapped below zero, for phases after the first in this multi-threaded process.
 */
#include <valgrind/callgrind.h>

/* Switch instrumentation on and dump, so that the next dump holds only what follows. */
void gate_start(void) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT("gate-start");
}

/* Write what ran since the previous dump, as a dump named `phase` (a part of its own). */
void gate_dump(const char *phase) {
    CALLGRIND_DUMP_STATS_AT(phase);
}

/* 1 under valgrind, 0 in a native run: a gate that counted nothing must say so. */
int gate_running_on_valgrind(void) {
    return RUNNING_ON_VALGRIND;
}
