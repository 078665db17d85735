/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop.h - the one libev loop every module runs on.
 *
 * Errors: none.
 */
#ifndef ENVD_LOOP_H
#define ENVD_LOOP_H

#include <ev.h>

/* The daemon's loop (ev_default_loop, which also owns child watchers). */
#define envd_loop EV_DEFAULT

#endif
