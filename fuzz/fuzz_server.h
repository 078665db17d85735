/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_server.h - drive the real server (conn, h1/h2, router, Connect) with
 * bytes over a socketpair, for the libFuzzer targets. A harmless test
 * service is registered (no process is ever spawned, no file touched).
 */
#ifndef ENVD_FUZZ_SERVER_H
#define ENVD_FUZZ_SERVER_H

#include <stddef.h>
#include <stdint.h>

/* Feed prefix + data to a fresh connection; drain and close it. */
void fuzz_serve(const void *prefix, size_t plen, const uint8_t *data, size_t n);

#endif
