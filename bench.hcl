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

# Kubernetes: one pod per session on the local test cluster (make k8s-up);
# not in make bench's default list (BENCH_SANDBOXES): `make bench-k8s` runs
# it beside tier 2. The library stays on the pod's emptyDir here.
sandbox "kubernetes" {
  plugin = "kubernetes"
  policy = "bench"
  config {
    kubeconfig  = "/var/tmp/orqest-k8s/kubeconfig/admin.kubeconfig"
    namespace   = "default"
    cpu_request = 0.05
  }
}
