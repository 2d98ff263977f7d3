package kubernetes

import "github.com/orqest/sandbox/internal/warmpool"

// PoolConfig is the config's `pool {}` block (size, max_idle): after a
// session of a user opens, the plugin creates one more pod for that user
// (the user's claim mounted, the runtime attached and waiting for its
// hello line), so the user's next Open only binds it (hello with a fresh
// secret, MCP initialize). The pool is per user because the library claim
// is mounted when the pod is created. A warm pod carries the owner labels
// like any other, so the reaper deletes those of a dead plugin; Shutdown
// deletes the rest, and a reconfiguration discards them.
type PoolConfig = warmpool.Config
