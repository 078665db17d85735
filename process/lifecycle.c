/* SPDX-License-Identifier: Apache-2.0 */
#include "process/lifecycle.h"

enum lc_state lifecycle_next(enum lc_state s, enum lc_event e)
{
	switch (s) {
	case LC_NEW:
		return e == LC_EV_REGISTERED ? LC_RUNNING : LC_NONE;
	case LC_RUNNING:
		return e == LC_EV_OUTPUT_EOF ? LC_OUTPUT_DONE : e == LC_EV_REAPED ? LC_REAPED : LC_NONE;
	case LC_OUTPUT_DONE:
		return e == LC_EV_REAPED ? LC_RETAINED : LC_NONE;
	case LC_REAPED:
		return e == LC_EV_OUTPUT_EOF ? LC_RETAINED : e == LC_EV_GRACE ? LC_ENDED : LC_NONE;
	case LC_ENDED:
		return e == LC_EV_OUTPUT_EOF ? LC_RETAINED : LC_NONE;
	case LC_RETAINED:
		return e == LC_EV_EXPIRED ? LC_EXPIRED : LC_NONE;
	case LC_NONE:
	case LC_EXPIRED:
		break;
	}
	return LC_NONE;
}

const char *lifecycle_state_name(enum lc_state s)
{
	static const char *const names[] = {
		[LC_NONE] = "none",       [LC_NEW] = "new",       [LC_RUNNING] = "running",
		[LC_OUTPUT_DONE] = "output-done", [LC_REAPED] = "reaped", [LC_ENDED] = "ended",
		[LC_RETAINED] = "retained", [LC_EXPIRED] = "expired",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}
