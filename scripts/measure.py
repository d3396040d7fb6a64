#!/usr/bin/env python3
"""Run a command (its output discarded) and print "WALL_SECONDS PEAK_RSS_KIB": the time from
starting it to reaping it, and its peak resident memory, both of that process alone (os.wait4),
with nothing of a wrapper's own start-up in either. Exits with the command's status."""
import os
import subprocess
import sys
import time

start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
wall = time.perf_counter() - start
print(f"{wall:.4f} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
