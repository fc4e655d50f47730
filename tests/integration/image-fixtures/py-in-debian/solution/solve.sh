#!/bin/sh
set -e
printf 'def mean(xs):\n    return sum(xs) / len(xs)\n' > stats.py
