#!/bin/sh
# The environment section of a system prompt: where the agent works, and the repository's state when it is one.
#
# The repository is the agent's to write (and may come from anywhere), so git must run nothing it names. Ollie
# runs this under the read-only sandbox with git hardened through GIT_CONFIG_COUNT (src/olliesrv/agent/
# promptcmd.ts); the settings below say the same again, so that the script is safe when run by hand too.
# Command-line settings win over the repository's .git/config and whatever it includes.
g() (
  unset GIT_EXTERNAL_DIFF GIT_SSH GIT_SSH_COMMAND GIT_PROXY_COMMAND GIT_EDITOR GIT_SEQUENCE_EDITOR
  export GIT_OPTIONAL_LOCKS=0 GIT_PAGER=cat GIT_TERMINAL_PROMPT=0 GIT_ASKPASS=/bin/false GIT_CONFIG_NOSYSTEM=1
  exec git --no-pager --no-optional-locks \
    -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.pager=cat \
    -c core.editor=/bin/false -c sequence.editor=/bin/false -c core.sshCommand=/bin/false -c core.askPass=/bin/false \
    -c credential.helper= -c protocol.allow=never -c protocol.ext.allow=never -c gpg.program=/bin/false \
    -c gpg.ssh.program=/bin/false -c gpg.x509.program=/bin/false -c log.showSignature=false \
    -c status.submoduleSummary=false -c safe.bareRepository=explicit \
    "$@"
)
printf '\n## Environment\nWorking directory: %s\nDate: %s\nSystem: %s\n' "$PWD" "$(date +%Y-%m-%d)" "$(uname -sm)"
if g rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # Filter drivers are chosen by .gitattributes under names the repository picks: switch off each one its own
  # configuration defines (git status runs a clean filter on files whose stat data changed).
  n=${GIT_CONFIG_COUNT:-0} tab=$(printf '\t')
  while IFS= read -r k; do
    [ -n "$k" ] || continue
    eval "GIT_CONFIG_KEY_$n=\$k GIT_CONFIG_VALUE_$n=; export GIT_CONFIG_KEY_$n GIT_CONFIG_VALUE_$n"
    n=$((n + 1))
  done <<EOF
$(g config --show-scope --name-only --get-regexp '^filter\..*\.(clean|smudge|process)$' 2>/dev/null | sed -n -e "s/^local$tab//p" -e "s/^worktree$tab//p")
EOF
  export GIT_CONFIG_COUNT=$n
  printf '\n## Repository\nBranch: %s\n' "$(g branch --show-current 2>/dev/null)"
  # No renames, no submodules: nothing that would start a diff driver or a git in another repository.
  changes=$(g status --short --no-renames --ignore-submodules=all 2>/dev/null | head -40)
  if [ -n "$changes" ]; then printf 'Uncommitted changes:\n%s\n' "$changes"; else printf 'Working tree clean.\n'; fi
  printf 'Recent commits:\n%s\n' "$(g log --oneline --no-show-signature -5 2>/dev/null)"
fi
