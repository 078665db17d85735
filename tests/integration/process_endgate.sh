#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# With the change journal on (as in the image), every command's end passes
# the journal's end hook. A reader that lags behind the output when the
# command ends still gets all of it before the end event: the hook may
# answer at once, before the end offset of the output is known.
. "$(dirname "$0")/process_lib.sh"
start_envd -changes-max-paths 10000

# 3 000 001 bytes, read at 1 MB/s: the command is long done (and the end
# reached) while most of its output is still to be sent.
stream Start '{"process":{"cmd":"/bin/sh","args":["-c","head -c 3000000 /dev/zero | tr \"\\\\0\" a; echo"]}}' \
	--limit-rate 1M >"$TMP/out.txt"
check "a lagging reader gets every byte before the end" 3000001 "$(stdout_of <"$TMP/out.txt" | wc -c)"
check "then the end event, then the end of the stream" "end eos" "$(kinds <"$TMP/out.txt" | grep -o 'end eos$')"
summary
