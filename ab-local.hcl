# The policy `make bench` measures: every tier side by side, same body, same
# limits. Tier 2 needs `make image` (make bench builds it).
plugin_dir = "bin"

policy "bench" {
  allowed_imports  = []
  timeout          = "5s"
  memory_mb        = 128
  max_output_bytes = 1048576
}

sandbox "inprocess" {
  plugin = "inprocess"
  policy = "bench"
  unsafe = true # tier 0 has no isolation: opt-in is mandatory
}

sandbox "forkserver" {
  plugin = "subprocess"
  policy = "bench"
  config { mode = "forkserver" }
}

sandbox "nohot" {
  plugin = "subprocess"
  policy = "bench"
  config {
    mode      = "forkserver"
    hot_pages = false
  }
}

sandbox "spawn" {
  plugin = "subprocess"
  policy = "bench"
  config { mode = "spawn" }
}

sandbox "docker" {
  plugin = "docker"
  policy = "bench"
}

# With the runtime beside the plugin (make build runtime), gvisor is a
# session tier: one sandbox running the agent runtime, the load inside it.
sandbox "gvisor" {
  plugin = "gvisor"
  policy = "bench"
  config { platform = "ptrace" }
}

# Tier 3 without sessions: each call in a fresh sandbox.
sandbox "gvisor-fresh" {
  plugin = "gvisor"
  policy = "bench"
  config {
    platform = "ptrace"
    sessions = false
  }
}
