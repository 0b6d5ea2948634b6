#!/usr/bin/env python3
"""Writes a C++ header defining `inline constexpr char NAME[]` with a text
file's bytes, so a binary carries a file (results/migrations/*.sql) that must also
stay readable on its own. Usage: embed_text.py INPUT OUTPUT NAME"""
import sys

source, output, name = sys.argv[1:4]
data = open(source, "rb").read()
# Bytes above 127 (UTF-8) as character literals: a plain number would not
# fit a signed char, and char's signedness differs between x86 and ARM.
body = ",".join(str(b) if b < 128 else "'\\x%02x'" % b for b in data)
with open(output, "w") as out:
    out.write("// Generated from %s by scripts/embed_text.py; do not edit.\n#pragma once\n" % source)
    out.write("inline constexpr char %s[] = {%s,0};\n" % (name, body))
