/* SPDX-License-Identifier: Apache-2.0 */
/* crlite: cr_log_info lives in criterion.h. */
#include <criterion/criterion.h>
