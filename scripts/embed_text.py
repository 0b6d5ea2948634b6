#!/usr/bin/env python3
"""Writes a C++ header defining `inline constexpr char NAME[]` with a text
file's bytes, so a binary carries a file (results/migrations/*.sql) that must also
stay readable on its own. Usage: embed_text.py INPUT OUTPUT NAME"""
import sys

source, output, name = sys.argv[1:4]
data = open(source, "rb").read()
body = ",".join(str(b) for b in data)
with open(output, "w") as out:
    out.write("// Generated from %s by scripts/embed_text.py; do not edit.\n#pragma once\n" % source)
    out.write("inline constexpr char %s[] = {%s,0};\n" % (name, body))
