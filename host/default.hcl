# The embedded default policy of orqest-sandbox. It applies when no --config is
# given and there is no config.hcl in the working directory: the tier-1
# subprocess backend, found next to the orqest-sandbox executable, with
# default-deny imports.

default_sandbox = "subprocess"

policy "default" {
  allowed_imports  = []
  allowed_packages = []
  timeout          = "5s"
  memory_mb        = 128
  max_output_bytes = 1048576
  max_code_bytes   = 65536
  max_args_bytes   = 1048576
}

sandbox "subprocess" {
  plugin = "subprocess"
  policy = "default"
}
