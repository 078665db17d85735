/* SPDX-License-Identifier: Apache-2.0 */
/* Raw HTTP/2 frames after the prior-knowledge preface, through the server. */
#include "fuzz_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	fuzz_serve(preface, sizeof(preface) - 1, data, n);
	return 0;
}
