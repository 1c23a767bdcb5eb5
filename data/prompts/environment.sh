#!/bin/sh
# The environment section of a system prompt: where the agent works, and the repository's state when it is one.
printf '\n## Environment\nWorking directory: %s\nDate: %s\nSystem: %s\n' "$PWD" "$(date +%Y-%m-%d)" "$(uname -sm)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  printf '\n## Repository\nBranch: %s\n' "$(git branch --show-current 2>/dev/null)"
  changes=$(git status --short 2>/dev/null | head -40)
  if [ -n "$changes" ]; then printf 'Uncommitted changes:\n%s\n' "$changes"; else printf 'Working tree clean.\n'; fi
  printf 'Recent commits:\n%s\n' "$(git log --oneline -5 2>/dev/null)"
fi
