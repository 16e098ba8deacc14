#!/usr/bin/python3
"""Reads Nsight Compute's source page exported as CSV (`ncu --import R.ncu-rep --page source --csv
--print-source sass > S.csv`): the SASS rows of the first launch of each kernel in the file, as
{kernel name: [row dict keyed by the CSV header]}. Shared by ncu_sass_regions.py and ncu_stalls.py."""
import csv


def first_launch_rows(path):
    kernels = {}
    with open(path, newline="") as f:
        hdr, cur = None, None
        for row in csv.reader(f):
            if row and row[0] == "Kernel Name":
                hdr = None
                cur = [] if row[1] not in kernels else None
                if cur is not None:
                    kernels[row[1]] = cur
                continue
            if row and row[0] == "Address":
                hdr = row
                continue
            if cur is not None and hdr:
                cur.append(dict(zip(hdr, row)))
    return kernels
