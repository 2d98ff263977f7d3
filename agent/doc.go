// Package agent is the agent runtime: the program (orqest-agent-runtime,
// built by cmd/orqest-agent-runtime) that runs inside a session's sandbox
// and executes the Python an agent generates. A tier-2 docker container, a
// gVisor sandbox of the gvisor backend's sessions and a kubernetes pod all
// run it as their main process, and their plugins talk to it the same way
// (internal/rtproto, internal/rtclient).
//
// # Protocol
//
// It reads one hello line from stdin (rtproto.Hello: the per-session HMAC
// secret and the user and session the tokens must name), then speaks MCP
// (newline-delimited JSON-RPC, the official Go SDK) on stdin/stdout until
// stdin closes, which happens when the plugin detaches or dies; the
// sandbox then exits. With -listen (policy network = "bridge") MCP is
// served over Streamable HTTP instead, behind an Origin check and the
// SDK's RequireBearerToken, and stdin's EOF still ends it. Every tools/call
// carries a bearer token (a JWT signed with the session's secret: in
// _meta.authorization over stdio, the Authorization header over HTTP) of
// agent or operator scope.
//
// # Tools
//
//   - execute_python (agent scope) validates and runs the body of a Python
//     function through the shared runner (internal/pyproc): by default in a
//     warm, sealed fork-server per agent (its C loop, runner/forkcore, when
//     the image provides it), or one interpreter per call (-exec-mode
//     spawn). The child's output can stream back as progress notifications.
//   - Notebook: a stateful call runs in the agent's own long-lived
//     interpreter, so globals persist across the agent's calls in the
//     session; the result says when they were lost (limits killed the
//     interpreter, or a new environment replaced it).
//   - Files: put_file, get_file and list_files serve the session's
//     workspace (rtproto.FilesDir, on the /workspace tmpfs, the only
//     directory the children may write); the files a call created or
//     changed come back as artifacts.
//   - Venvs: an agent that names dependencies gets its own virtual
//     environment under the workdir; the runtime installs the wheels from
//     the operator's wheel directory itself (no pip, no network), each checked
//     against its RECORD and gated by allowed_packages; native wheels go to
//     an exec-allowed directory the plugin provides.
//   - Tool library: a per-user SQLite database (-library, /data by
//     default) records named invocations and promotes them to MCP tools of
//     their own (by threshold, eagerly, or on operator approval), replays
//     them in later sessions, demotes failing ones, and repairs its own
//     files; list_tools, promote_tool and forget_tool manage it.
//   - runtime_info (operator scope): version, interpreter, rules digest,
//     uptime and the sealing layers in force.
//
// # Isolation
//
// In the tier-2 image it runs as root with only CAP_CHOWN, CAP_KILL,
// CAP_SETUID and CAP_SETGID, no-new-privileges, a read-only root and no
// network by default. It alone owns /data, the user's tool library (0700);
// every Python process it starts drops to 65534:65534 (the runner's seal)
// before any user code exists, so user code cannot read, change or remove
// the library even when every other layer fails.
//
// It is a static Go binary (CGO_ENABLED=0) so it runs on any base image.
// The Go validator (tree-sitter, cgo) is therefore not linked in:
// validation runs in the host and in the plugin (Go), and here in the
// Python child (the in-child checker of package rules, reading the same
// rules table, which this package embeds).
package agent
