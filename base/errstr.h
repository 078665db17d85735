/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errstr.h - errno texts as Go prints them (lower-case glibc wording), so
 * messages match the reference regardless of libc (docs/protocol.md,
 * "Go-compatible strings").
 *
 * Errors: none (an unknown value gives "errno N").
 */
#ifndef ENVD_ERRSTR_H
#define ENVD_ERRSTR_H

/* "no such file or directory" etc.; "errno N" for unknown values. */
const char *go_strerror(int errnum);

#endif
