/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errstr.c - errno texts with Go's (glibc-derived, lower-case) wording.
 *
 * musl's strerror capitalises and rewords several messages, and the
 * reference's error strings reach clients verbatim, so we keep our own
 * table (Go's syscall/zerrors_linux_amd64.go errors table).
 */
#include "base/errstr.h"

#include <errno.h>
#include <stdio.h>

struct errstr_entry {
	int num;
	const char *text;
};

static const struct errstr_entry errstr_table[] = {
	{ EPERM, "operation not permitted" },
	{ ENOENT, "no such file or directory" },
	{ ESRCH, "no such process" },
	{ EINTR, "interrupted system call" },
	{ EIO, "input/output error" },
	{ ENXIO, "no such device or address" },
	{ E2BIG, "argument list too long" },
	{ ENOEXEC, "exec format error" },
	{ EBADF, "bad file descriptor" },
	{ ECHILD, "no child processes" },
	{ EAGAIN, "resource temporarily unavailable" },
	{ ENOMEM, "cannot allocate memory" },
	{ EACCES, "permission denied" },
	{ EFAULT, "bad address" },
	{ ENOTBLK, "block device required" },
	{ EBUSY, "device or resource busy" },
	{ EEXIST, "file exists" },
	{ EXDEV, "invalid cross-device link" },
	{ ENODEV, "no such device" },
	{ ENOTDIR, "not a directory" },
	{ EISDIR, "is a directory" },
	{ EINVAL, "invalid argument" },
	{ ENFILE, "too many open files in system" },
	{ EMFILE, "too many open files" },
	{ ENOTTY, "inappropriate ioctl for device" },
	{ ETXTBSY, "text file busy" },
	{ EFBIG, "file too large" },
	{ ENOSPC, "no space left on device" },
	{ ESPIPE, "illegal seek" },
	{ EROFS, "read-only file system" },
	{ EMLINK, "too many links" },
	{ EPIPE, "broken pipe" },
	{ EDOM, "numerical argument out of domain" },
	{ ERANGE, "numerical result out of range" },
	{ EDEADLK, "resource deadlock avoided" },
	{ ENAMETOOLONG, "file name too long" },
	{ ENOLCK, "no locks available" },
	{ ENOSYS, "function not implemented" },
	{ ENOTEMPTY, "directory not empty" },
	{ ELOOP, "too many levels of symbolic links" },
	{ ENOMSG, "no message of desired type" },
	{ EIDRM, "identifier removed" },
	{ ENOSTR, "device not a stream" },
	{ ENODATA, "no data available" },
	{ ETIME, "timer expired" },
	{ ENOSR, "out of streams resources" },
	{ ENOLINK, "link has been severed" },
	{ EPROTO, "protocol error" },
	{ EMULTIHOP, "multihop attempted" },
	{ EBADMSG, "bad message" },
	{ EOVERFLOW, "value too large for defined data type" },
	{ EILSEQ, "invalid or incomplete multibyte or wide character" },
	{ EUSERS, "too many users" },
	{ ENOTSOCK, "socket operation on non-socket" },
	{ EDESTADDRREQ, "destination address required" },
	{ EMSGSIZE, "message too long" },
	{ EPROTOTYPE, "protocol wrong type for socket" },
	{ ENOPROTOOPT, "protocol not available" },
	{ EPROTONOSUPPORT, "protocol not supported" },
	{ ESOCKTNOSUPPORT, "socket type not supported" },
	{ EOPNOTSUPP, "operation not supported" },
	{ EPFNOSUPPORT, "protocol family not supported" },
	{ EAFNOSUPPORT, "address family not supported by protocol" },
	{ EADDRINUSE, "address already in use" },
	{ EADDRNOTAVAIL, "cannot assign requested address" },
	{ ENETDOWN, "network is down" },
	{ ENETUNREACH, "network is unreachable" },
	{ ENETRESET, "network dropped connection on reset" },
	{ ECONNABORTED, "software caused connection abort" },
	{ ECONNRESET, "connection reset by peer" },
	{ ENOBUFS, "no buffer space available" },
	{ EISCONN, "transport endpoint is already connected" },
	{ ENOTCONN, "transport endpoint is not connected" },
	{ ESHUTDOWN, "cannot send after transport endpoint shutdown" },
	{ ETOOMANYREFS, "too many references: cannot splice" },
	{ ETIMEDOUT, "connection timed out" },
	{ ECONNREFUSED, "connection refused" },
	{ EHOSTDOWN, "host is down" },
	{ EHOSTUNREACH, "no route to host" },
	{ EALREADY, "operation already in progress" },
	{ EINPROGRESS, "operation now in progress" },
	{ ESTALE, "stale NFS file handle" },
	{ EDQUOT, "disk quota exceeded" },
	{ ENOMEDIUM, "no medium found" },
	{ EMEDIUMTYPE, "wrong medium type" },
	{ ECANCELED, "operation canceled" },
	{ ENOKEY, "required key not available" },
	{ EKEYEXPIRED, "key has expired" },
	{ EKEYREVOKED, "key has been revoked" },
	{ EKEYREJECTED, "key was rejected by service" },
	{ EOWNERDEAD, "owner died" },
	{ ENOTRECOVERABLE, "state not recoverable" },
	{ ERFKILL, "operation not possible due to RF-kill" },
	{ EHWPOISON, "memory page has hardware error" },
	{ ENOTUNIQ, "name not unique on network" },
	{ EBADFD, "file descriptor in bad state" },
	{ EREMCHG, "remote address changed" },
	{ EUCLEAN, "structure needs cleaning" },
	{ EREMOTEIO, "remote I/O error" },
	{ ENOPKG, "package not installed" },
	{ ECOMM, "communication error on send" },
	{ ENONET, "machine is not on the network" },
	{ EREMOTE, "object is remote" },
	{ ESTRPIPE, "streams pipe error" },
	{ EBADE, "invalid exchange" },
	{ EBADR, "invalid request descriptor" },
	{ EXFULL, "exchange full" },
	{ ENOANO, "no anode" },
	{ EBADRQC, "invalid request code" },
	{ EBADSLT, "invalid slot" },
	{ ECHRNG, "channel number out of range" },
	{ EL2NSYNC, "level 2 not synchronized" },
	{ EL3HLT, "level 3 halted" },
	{ EL3RST, "level 3 reset" },
	{ ELNRNG, "link number out of range" },
	{ EUNATCH, "protocol driver not attached" },
	{ ENOCSI, "no CSI structure available" },
	{ EL2HLT, "level 2 halted" },
	{ EBFONT, "bad font file format" },
	{ EADV, "advertise error" },
	{ ESRMNT, "srmount error" },
	{ EDOTDOT, "RFS specific error" },
	{ ELIBACC, "can not access a needed shared library" },
	{ ELIBBAD, "accessing a corrupted shared library" },
	{ ELIBSCN, ".lib section in a.out corrupted" },
	{ ELIBMAX, "attempting to link in too many shared libraries" },
	{ ELIBEXEC, "cannot exec a shared library directly" },
	{ ERESTART, "interrupted system call should be restarted" },
	{ ENOTNAM, "not a XENIX named type file" },
	{ ENAVAIL, "no XENIX semaphores available" },
	{ EISNAM, "is a named type file" },
};

const char *go_strerror(int errnum)
{
	/* Thread-local so worker threads can format their own errors. */
	static _Thread_local char unknown[24];

	if (errnum < 0)
		errnum = -errnum;
	for (size_t i = 0; i < sizeof(errstr_table) / sizeof(errstr_table[0]); i++)
		if (errstr_table[i].num == errnum)
			return errstr_table[i].text;
	snprintf(unknown, sizeof(unknown), "errno %d", errnum);
	return unknown;
}
