# Example orqest-sandbox policy, used by `make demo`. Without --config and
# without a config.hcl in the working directory, the embedded default applies
# (host/default.hcl): the subprocess tier and default-deny imports.

# Where plugin binaries live (orqest-sandbox-plugin-<name>), relative to this file.
plugin_dir = "bin"

default_sandbox = "tier1"

# A plugin may be pinned to a checksum, verified before every launch:
#   plugin "subprocess" { sha256 = "<hex of bin/orqest-sandbox-plugin-subprocess>" }
plugin "subprocess" {}

policy "default" {
  allowed_imports  = ["re", "math", "json", "collections", "itertools", "string"]
  timeout          = "5s"
  memory_mb        = 128
  max_output_bytes = 1048576
}

policy "strict" {
  allowed_imports  = []
  timeout          = "1s"
  memory_mb        = 64
  max_output_bytes = 65536
}

sandbox "tier1" {
  plugin = "subprocess"
  policy = "default"
  config {
    mode   = "forkserver" # the default: a warm zygote forks a fresh sealed child per call
    python = "/usr/bin/python3"
  }
}

sandbox "strict" {
  plugin = "subprocess"
  policy = "strict"
  config {
    mode    = "spawn"                                        # one fresh python3 per call
    require = ["network_isolation", "filesystem_isolation"] # refuse to start without them
  }
}
