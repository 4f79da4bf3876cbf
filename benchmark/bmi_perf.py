#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""bmi-perf: runs libbmi's benchmark drivers and the baselines found on this machine in
latency, bandwidth, rate and many-client modes; prints tables, writes CSV, plots.

This file only finds its modules: the command line and the modes are bmi_perf_modes.py.
"""
import os
import sys

LIBEXECDIR = "@LIBEXECDIR@"  # where meson install puts the drivers; replaced at configure time


def main():
    # The drivers and the modules live together: next to this script (a build tree), or
    # where meson install put them.
    tool_dirs = [os.path.dirname(os.path.abspath(__file__)), LIBEXECDIR]
    sys.path[:0] = tool_dirs
    import bmi_perf_modes
    return bmi_perf_modes.main(sys.argv[1:], tool_dirs)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
