#!/usr/bin/env python3
"""Prints the test executables of one workspace package.

Reads `cargo test --no-run --message-format=json` on stdin; the argument is
the package's manifest, relative to the workspace root (this script's
parent folder). One path per line, in cargo's order.
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
manifest = (root / sys.argv[1]).resolve()
for line in sys.stdin:
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        continue
    if message.get("reason") != "compiler-artifact":
        continue
    if pathlib.Path(message.get("manifest_path", "")).resolve() != manifest:
        continue
    if not message.get("executable"):
        continue
    # Integration tests (with or without the harness) and unit tests.
    kinds = message.get("target", {}).get("kind", [])
    if "test" in kinds or message.get("profile", {}).get("test"):
        print(message["executable"])
