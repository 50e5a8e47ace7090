"""The file-system functions as they were before the file guard replaced them.

The harness's own files (its config, the evidence, the progress, the overlay's sources) are
read and written through these, never through what the script sees.
"""

import builtins
import os

open = builtins.open  # the real ``open``: this module is always used qualified (realos.open)
os_open = os.open
stat = os.stat
lstat = os.lstat
listdir = os.listdir
scandir = os.scandir
rmdir = os.rmdir
replace = os.replace
