#!/bin/sh
# Prints a prompt fragment: the user's copy ($OLLIE_CONFIG/prompts/NAME.md) if there is one, else the shipped one.
for d in "$OLLIE_CONFIG/prompts" "$OLLIE_DATA/prompts"; do
  if [ -f "$d/$1.md" ]; then exec cat "$d/$1.md"; fi
done
echo "ollie: no prompt fragment named $1 (looked in $OLLIE_CONFIG/prompts and $OLLIE_DATA/prompts)" >&2
exit 1
