# goal: drop into the debugger (breakpoint) to get an interactive shell
breakpoint()
return "after breakpoint"
