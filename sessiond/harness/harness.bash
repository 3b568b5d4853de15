if [[ ${#BASH_SOURCE[@]} -gt 1 ]]; then builtin eval "$__paddock_prefix$__paddock_cmd"; builtin return; fi
# SPDX-License-Identifier: MIT
#
# paddock's persistent bash harness. The sandbox's init starts it as
#   /bin/bash --noprofile --norc /opt/paddock/harness.bash
# with fd 0 = /dev/null, fd 1 and 2 = pipes read by sessiond, fd 3 = the
# control socket. Protocol (docs/harness-protocol.md): a request is the
# command's bytes followed by one NUL byte, optionally preceded by a line
# holding only a decimal request id; the reply is "<status>\n", or
# "<id> <status>\n" when the request had an id.
#
# The first line above must stay the first line. Each command runs by sourcing
# this file again (the main loop below does that): a sourced file runs in the
# main shell's scope, so `cd`, `export`, `declare -A` and functions persist,
# and, unlike a bare `eval`, it can be cut short by `return` from the SIGINT
# trap. Being on line 1, the eval also keeps bash's "line N" messages equal to
# the user's own line numbers.

# Keep the control socket away from fd 3, which scripts like to use.
exec 63<&3 3<&-

__paddock_self=${BASH_SOURCE[0]}
[[ $__paddock_self == /* ]] || __paddock_self=$PWD/$__paddock_self
__paddock_cmd=
__paddock_id=
__paddock_prefix=
__paddock_busy=
__paddock_interrupted=
__paddock_flags=
__paddock_tools=

# sessiond interrupts a run that outlives its timeout with SIGINT to the whole
# process group. The foreground command gets it too and (normally) dies; bash
# then runs this trap, which ends the sourced command list with status 130 and
# leaves the shell alive with its state. Idle, the trap does nothing.
# errexit is switched off for that return (or `set -e` would end the shell on
# the 130); the loop restores the user's flags afterwards.
# Inside a user function, `return` would leave only that function, so there
# the trap just notes the interruption: the function goes on after its killed
# command, the status is 130 all the same, and sessiond's kill after its grace
# period stops whatever still runs.
__paddock_int_trap='
	if [[ -n ${__paddock_busy-} ]]; then
		__paddock_interrupted=1
		if [[ ${#FUNCNAME[@]} -eq 0 ]]; then
			[[ -n $__paddock_flags ]] || __paddock_flags=$-
			set +e
			builtin return 130
		fi
	fi'
trap "$__paddock_int_trap" INT

# Turns the user's xtrace/verbose back on as the first thing the command does,
# so the harness's own lines are never traced.
__paddock_trace_prefix() {
	__paddock_prefix=
	[[ $__paddock_flags == *x* ]] && __paddock_prefix+='set -x; '
	[[ $__paddock_flags == *v* ]] && __paddock_prefix+='set -v; '
	builtin return 0
}

# A first line of digits only is sessiond's request id, not a command (a bare
# number is no useful command either); it is echoed in the reply. " tools"
# after the id says the session has programmatic tools: the command then gets
# their channel on fd 62. sessiond starts each request with a \001, which no
# tool answer holds: what a killed paddock-tool left unread goes before it.
__paddock_split_id() {
	[[ $__paddock_cmd == *$'\001'* ]] && __paddock_cmd=${__paddock_cmd#*$'\001'}
	__paddock_id=
	__paddock_tools=
	[[ $__paddock_cmd == *$'\n'* ]] || builtin return 0
	local first=${__paddock_cmd%%$'\n'*} tools=
	if [[ $first == *' tools' ]]; then
		first=${first% tools}
		tools=1
	fi
	if [[ -n $first && $first != *[!0-9]* ]]; then
		__paddock_id=$first
		__paddock_tools=$tools
		__paddock_cmd=${__paddock_cmd#*$'\n'}
	fi
	builtin return 0
}

# paddock-tool NAME [INPUT]: call a programmatic tool (docs/otari.md) with INPUT,
# a JSON object ({} when left out). Prints the tool's content (JSON) and
# succeeds, or prints its error and exits 1; 2 when it could not be asked.
# Exported, so scripts the command starts have it too; calls take turns.
paddock-tool() {
	local name=${1-} input=${2-'{}'} line
	if [[ $# -lt 1 || $# -gt 2 || ! $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
		builtin echo 'usage: paddock-tool NAME [INPUT-JSON-OBJECT]' >&2
		builtin return 2
	fi
	if ! { : >&62; } 2>/dev/null; then
		builtin echo 'paddock-tool: no programmatic tools are registered for this session' >&2
		builtin return 2
	fi
	{
		command -v flock >/dev/null && flock 61
		builtin printf '{"event":"tool_call","name":"%s","input":%s}\n' "$name" \
			"${input//$'\n'/ }" >&62 &&
			IFS= builtin read -r -u 62 line
	} 61>>/tmp/.paddock-tool.lock
	if [[ -z $line ]]; then
		builtin echo 'paddock-tool: the tool channel closed' >&2
		builtin return 2
	fi
	if [[ ${line%% *} == 0 ]]; then
		builtin printf '%s\n' "${line#* }"
		builtin return 0
	fi
	builtin printf 'paddock-tool: %s\n' "${line#* }" >&2
	builtin return 1
}
export -f paddock-tool

while :; do
	__paddock_cmd=
	__paddock_status=0
	# read stops at the NUL; -r keeps backslashes, empty IFS keeps blanks.
	# (`||` so that a user's `set -e` cannot end the loop here.)
	IFS= builtin read -r -d '' -u 63 __paddock_cmd || __paddock_status=$?
	if [[ $__paddock_status -eq 1 ]]; then
		builtin exit 0 # end of file: sessiond is done with us
	elif [[ $__paddock_status -ne 0 ]]; then
		builtin continue # a signal interrupted the wait
	fi
	__paddock_split_id
	__paddock_trace_prefix
	__paddock_busy=1
	__paddock_interrupted=
	__paddock_flags=
	# stdin is /dev/null for every command; fd 63 is closed for the command's
	# duration (bash keeps a close-on-exec copy) so no child inherits it.
	if [[ -n $__paddock_tools ]]; then
		builtin source "$__paddock_self" </dev/null 62>&63 63>&-
	else
		builtin source "$__paddock_self" </dev/null 63>&-
	fi
	{
		__paddock_status=$?
		__paddock_busy=
		if [[ -n $__paddock_interrupted ]]; then
			__paddock_status=130
			# After a trap that ended in `return`, bash 5.2 no longer runs the
			# trap while only builtins execute (a `while :; do :; done` could
			# not be interrupted again); setting the trap anew clears that.
			trap - INT
			trap "$__paddock_int_trap" INT
		fi
		# The trap saved the flags already when it fired.
		[[ -n $__paddock_flags ]] || __paddock_flags=$-
		[[ $__paddock_flags == *e* ]] && set -e
		set +xv
	} 2>/dev/null
	if [[ -n $__paddock_id ]]; then
		builtin printf '%s %d\n' "$__paddock_id" "$__paddock_status" >&63
	else
		builtin printf '%d\n' "$__paddock_status" >&63
	fi
done
