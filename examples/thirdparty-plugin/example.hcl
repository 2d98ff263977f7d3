# A policy that runs code through the example third-party backend.
#   orqest-sandbox plugins list --config examples/thirdparty-plugin/example.hcl
#   orqest-sandbox run --config examples/thirdparty-plugin/example.hcl --sandbox example -e 'return 1+1'

# Relative to this file: the repository's bin/, where `make example` puts
# orqest-sandbox-plugin-pyexec next to the host's own plugins.
plugin_dir = "../../bin"

default_sandbox = "example"

# Optional: pin the binary to its checksum (sha256sum bin/orqest-sandbox-plugin-pyexec).
# plugin "pyexec" { sha256 = "<hex>" }

policy "default" {
  allowed_imports  = ["math", "re", "json"]
  timeout          = "5s"
  memory_mb        = 128
  max_output_bytes = 1048576
}

sandbox "example" {
  plugin = "pyexec"
  policy = "default"
  # The attributes pyexec declares in its ConfigSchema (see backend.go).
  config {
    python       = "/usr/bin/python3"
    max_parallel = 4
  }
}
