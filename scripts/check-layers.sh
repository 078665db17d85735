#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Layering check (docs/architecture.md, "Layers"): includes go to the own
# folder or a lower one, and no include cycles. check-layers.sh [ROOT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/check-layers.py" "${1:-$(dirname "$here")}"
