package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/internal/warmpool"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
	"github.com/orqest/sandbox/validator"
)

// Version is the backend's default version; `version` (set by -ldflags
// "-X github.com/orqest/sandbox/plugins/docker.version=...") is what Info reports and what names the default
// image, so `make VERSION=x build image` keeps the two in step.
const Version = "0.1.0"

var version = Version

// Defaults of the `config {}` block.
const (
	ImageRepo          = "orqest/agent-runtime"
	DefaultMemoryMB    = 512 // the container's memory cgroup
	DefaultCPUs        = 1.0
	DefaultPidsLimit   = 128
	DefaultWorkspaceMB = 64
	DefaultNetwork     = NetworkNone
	NetworkNone        = "none"
	NetworkBridge      = "bridge"
	DefaultOpenTimeout = 30 * time.Second

	// MaxArgsBytes caps the JSON args of one execution.
	MaxArgsBytes = shared.DefaultMaxArgsBytes
)

// Config is the backend's `config {}` block.
type Config struct {
	// Image is the runtime image (built by `make image`).
	Image string `json:"image"`
	// MemoryMB is the container's memory limit (cgroup), MB.
	MemoryMB int `json:"memory_mb"`
	// CPUs is the container's CPU quota (NanoCPUs = CPUs * 1e9).
	CPUs float64 `json:"cpus"`
	// PidsLimit caps the processes of the container (fork bombs).
	PidsLimit int `json:"pids_limit"`
	// WorkspaceMB is the size of the /workspace tmpfs.
	WorkspaceMB int `json:"workspace_mb"`
	// Network is "none" (default: MCP over the attached stdio, the container
	// has no network at all) or "bridge" (MCP over
	// Streamable HTTP on port 8000, published on 127.0.0.1 only; the
	// container can then reach the network).
	Network string `json:"network"`
	// AllowedOrigins, when set, is passed to the runtime as
	// ORQEST_ALLOWED_ORIGINS (bridge mode; "" disables the Origin check).
	AllowedOrigins *string `json:"allowed_origins"`
	// OpenTimeout bounds container start to MCP initialize, e.g. "30s".
	OpenTimeout string `json:"open_timeout"`
	// WheelDir is an absolute host directory of wheels (*.whl), mounted
	// read-only at rtproto.WheelMount: the package source of dependencies
	// (only those in the policy's allowed_packages are installed).
	WheelDir string `json:"wheel_dir"`
	// Runtime is the OCI runtime the engine starts session containers
	// with (docker run --runtime), e.g. "runsc" where the engine has gVisor
	// registered; "" is the engine's default (runc). Configure refuses a
	// runtime the engine does not know.
	Runtime string `json:"runtime"`
	// Endpoint is the Docker engine to use ("unix:///run/user/1000/docker.sock",
	// "tcp://host:2376"); "" means DOCKER_HOST or the local socket. The
	// plugin's own environment is the host's only when the host passes it,
	// so this is how a remote or rootless engine is named.
	Endpoint string `json:"endpoint"`
	// PausedDir holds one directory per paused session (0700: its saved
	// globals and the kit's record, signed with the key kept beside them,
	// pause.go), kept across plugin and host restarts.
	PausedDir string `json:"paused_dir"`
	// Pool keeps warm containers (PoolConfig); nil or size 0: none.
	Pool *PoolConfig `json:"pool"`
	// Promotion is the tool library's policy: the `promotion {}` block
	// inside the sandbox's config block (a nested block of the schema).
	Promotion *toollib.Promotion `json:"promotion"`

	openTimeout time.Duration
	// allowedPackages is the policy's allowed_packages (ConfigureRequest).
	allowedPackages []string
	// classes is ConfigureRequest.Classes: bodies may define classes (the
	// runtime is started with -classes).
	classes bool
	// prepare and stateful are ConfigureRequest.AllowedImports and
	// Stateful, for the runtime's flags (rtproto.RuntimeFlags).
	prepare  []string
	stateful bool
	// egress is ConfigureRequest.Egress parsed (egress.go); nil: no
	// network at all.
	egress *egress.Policy
}

// runtimeFlags are the runtime's command-line flags of cfg: the container's
// memory limit is a cgroup's.
func (cfg Config) runtimeFlags() rtproto.RuntimeFlags {
	return rtproto.RuntimeFlags{Classes: cfg.classes, Prepare: cfg.prepare, Stateful: cfg.stateful, MemoryCgroup: true}
}

// PoolConfig is the config's `pool {}` block (size, max_idle): after a
// user's session opens, one more container of that user is created and
// started ahead of demand (its volume mounted, the runtime waiting for its
// hello line), so the user's next Open only binds it. The pool is per user
// because Docker mounts the user's volume only when it creates a
// container. Warm containers carry the owner labels like any other, so the
// reaper removes those of a host that died.
type PoolConfig = warmpool.Config

// DefaultPoolMaxIdle is how long a warm container waits by default.
const DefaultPoolMaxIdle = warmpool.DefaultMaxIdle

// DefaultImage is the runtime image of this plugin's version.
func DefaultImage() string { return ImageRepo + ":" + version }

func defaultConfig() Config {
	return Config{
		Image:       DefaultImage(),
		MemoryMB:    DefaultMemoryMB,
		CPUs:        DefaultCPUs,
		PidsLimit:   DefaultPidsLimit,
		WorkspaceMB: DefaultWorkspaceMB,
		Network:     DefaultNetwork,
		openTimeout: DefaultOpenTimeout,
	}
}

// Backend is the tier-2 Docker sandbox. It is safe for concurrent use. Its
// sessions (Open, Close, Execute, files, the tool library) are the
// embedded session.Manager's; the backend starts and removes containers.
type Backend struct {
	*session.Manager

	logger       hclog.Logger
	validator    *validator.Validator
	maxCodeBytes int
	owner        ownerInfo

	mu       sync.Mutex
	cfg      Config
	docker   *client.Client
	dockerAt string // the endpoint docker speaks to ("" = DOCKER_HOST or the local socket)
	reaped   bool

	// egressEvents are the egress proxies' events waiting for the next
	// response (egress.go).
	egressEvents egress.Queue
	// egressLookup resolves names for the proxies (nil: the system's
	// resolver); a test sets it to stand for DNS.
	egressLookup egress.LookupFunc
}

var _ shared.Sandbox = (*Backend)(nil)

// NewBackend returns a Backend with the default configuration. It does not
// touch Docker.
func NewBackend(logger hclog.Logger) *Backend {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &Backend{
		logger:       logger,
		validator:    validator.New(),
		maxCodeBytes: validator.MaxCodeBytes(),
		owner:        currentOwner(),
		cfg:          defaultConfig(),
	}
	b.Manager = session.New(session.Config{
		Impl:         &mcp.Implementation{Name: "orqest-sandbox-plugin-docker", Version: version},
		Driver:       driver{b},
		Logger:       logger,
		Validate:     b.check,
		Check:        b.checkRequest,
		MaxCodeBytes: b.maxCodeBytes,
		MaxArgsBytes: MaxArgsBytes,
		Sessionless:  true,
		StopTimeout:  30 * time.Second,
	})
	b.Manager.Configure(b.settings(b.cfg))
	return b
}

// settings are the session settings of cfg: its open timeout, its pool,
// and the hello line's promotion policy and packages.
func (b *Backend) settings(cfg Config) session.Settings {
	return session.Settings{
		OpenTimeout: cfg.openTimeout,
		Pool:        cfg.Pool,
		Hello: func(h *rtproto.Hello) {
			*h = withPromotion(cfg, sessionHello(cfg, h.Secret, h.User, h.Session)) // library.go, deps_plugin.go
		},
	}
}

// check runs the Go validator with the configured features, unless the
// host's verdict on the same check is trusted (validator.CheckTrusting).
func (b *Backend) check(ctx context.Context, code string, allowed []string, verdict *shared.Verdict) []shared.Finding {
	found, _ := b.validator.CheckTrusting(ctx, code, allowed, validator.Features{Classes: b.config().classes}, verdict)
	return found
}

// checkRequest refuses dependencies outside the policy's allowed_packages
// (from Configure); the host checked already, the runtime checks again.
func (b *Backend) checkRequest(req shared.ExecuteRequest) error {
	_, err := shared.CheckDependencies(req.Dependencies, b.config().allowedPackages)
	return err
}

// Info describes the backend.
func (b *Backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	caps := []shared.Capability{
		shared.CapMemoryLimit,
		shared.CapCPULimit,
		shared.CapWallClockTimeout,
		shared.CapProcessIsolation,
		shared.CapNetworkIsolation,
		shared.CapFilesystemIsolation,
		shared.CapSessions,
		shared.CapFreshProcess,
		shared.CapOutputLimit,
		shared.CapDependencies,
		shared.CapToolLibrary,
		shared.CapStatefulSessions,
		shared.CapStreaming,
		shared.CapFiles,
		shared.CapPause, // not CapPauseMemory: the plain globals and the volume come back (pause.go)
	}
	if b.config().classes {
		caps = append(caps, shared.CapClasses)
	}
	if b.config().Network != NetworkNone {
		caps = slices.DeleteFunc(caps, func(c shared.Capability) bool { return c == shared.CapNetworkIsolation })
	} else {
		caps = append(caps, shared.CapEgress) // egress.go
	}
	return shared.InfoResponse{
		Name:         "docker",
		Tier:         2,
		Version:      version,
		APIVersions:  []int{shared.APIVersion},
		Capabilities: caps,
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "image", Type: "string", Description: "runtime image (default " + DefaultImage() + "; built by `make image`)"},
			{Name: "memory_mb", Type: "number", Description: "container memory limit in MB (default 512)"},
			{Name: "cpus", Type: "number", Description: "container CPU quota (default 1)"},
			{Name: "pids_limit", Type: "number", Description: "container process limit (default 128)"},
			{Name: "workspace_mb", Type: "number", Description: "size of the /workspace tmpfs in MB (default 64)"},
			{Name: "network", Type: "string", Description: `"none" (default: no network, MCP over the attached stdio) or "bridge" (MCP over HTTP published on 127.0.0.1:<random>; the container can reach the network)`},
			{Name: "allowed_origins", Type: "string", Description: `bridge mode: ORQEST_ALLOWED_ORIGINS for the runtime (default loopback origins; "" disables the Origin check)`},
			{Name: "open_timeout", Type: "string", Description: `container start to MCP initialize bound (default "30s")`},
			{Name: "wheel_dir", Type: "string", Description: "absolute host directory of wheels, mounted read-only into the container: the source of `dependencies` (only the policy's allowed_packages are installed: pure-Python wheels into a per-agent venv, native ones for the container's CPython and platform into an exec-allowed, runtime-owned tmpfs)"},
			{Name: "runtime", Type: "string", Description: `OCI runtime of the session containers (docker run --runtime), e.g. "runsc" where the engine has gVisor registered; default: the engine's (runc)`},
			{Name: "endpoint", Type: "string", Description: `the Docker engine, e.g. "unix:///run/user/1000/docker.sock" (rootless) or "tcp://host:2376"; default DOCKER_HOST or the local socket`},
			{Name: "paused_dir", Type: "string", Description: "host directory of paused sessions (one 0700 directory per session id: its plain-data globals and record, HMAC-signed with a key kept in the directory), kept across plugin and host restarts; default: the user cache directory's orqest-sandbox/docker-paused"},
			warmpool.Schema("container"),
			toollib.Schema(),
		},
		Description: "Tier 2: one hardened container per session (cap-drop ALL but CHOWN/KILL/SETUID/SETGID for the runtime, read-only root, the runtime as root owning /data alone and user code on uid 65534 without capabilities, pids/memory/cpu limits, no-new-privileges, no network, tmpfs /workspace, per-user volume /data) running an MCP runtime over the attached stdio; every call carries a per-session HS256 JWT.",
	}, nil
}

// Configure applies the `config {}` block, checks that the engine answers
// and that the image exists, and reaps containers a dead owner left behind.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	cfg := defaultConfig()
	if err := shared.DecodeConfig("docker", req.Config, &cfg); err != nil {
		return shared.ConfigureResponse{}, err
	}
	def := defaultConfig()
	if cfg.Image == "" {
		cfg.Image = def.Image
	}
	if cfg.Network == "" {
		cfg.Network = def.Network
	}
	for _, l := range []struct {
		field string
		neg   bool
	}{{"memory_mb", cfg.MemoryMB < 0}, {"cpus", cfg.CPUs < 0}, {"pids_limit", cfg.PidsLimit < 0}, {"workspace_mb", cfg.WorkspaceMB < 0}} {
		if l.neg {
			return shared.ConfigureResponse{}, shared.ConfigError("docker", l.field, nil, "a negative limit; leave it out for the default")
		}
	}
	if cfg.MemoryMB > shared.MaxMemoryMB {
		return shared.ConfigureResponse{}, shared.ConfigError("docker", "memory_mb", nil, "%d MB is over the largest limit, %d MB", cfg.MemoryMB, shared.MaxMemoryMB)
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = def.MemoryMB
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = def.CPUs
	}
	if cfg.PidsLimit == 0 {
		cfg.PidsLimit = def.PidsLimit
	}
	if cfg.WorkspaceMB == 0 {
		cfg.WorkspaceMB = def.WorkspaceMB
	}
	cfg.openTimeout = def.openTimeout
	if err := cfg.normalizePromotion(); err != nil { // library.go
		return shared.ConfigureResponse{}, err
	}
	if cfg.OpenTimeout != "" {
		d, err := time.ParseDuration(cfg.OpenTimeout)
		if err != nil || d <= 0 {
			return shared.ConfigureResponse{}, shared.ConfigError("docker", "open_timeout", nil, "%q: want a positive duration like \"30s\"", cfg.OpenTimeout)
		}
		cfg.openTimeout = d
	}
	if err := cfg.normalizePaused(); err != nil { // pause.go
		return shared.ConfigureResponse{}, err
	}
	if err := cfg.Pool.Normalize(); err != nil { // pool.go
		return shared.ConfigureResponse{}, fmt.Errorf("docker config: %w", err)
	}
	if cfg.WheelDir != "" {
		if !filepath.IsAbs(cfg.WheelDir) {
			return shared.ConfigureResponse{}, shared.ConfigError("docker", "wheel_dir", nil, "%q must be an absolute path", cfg.WheelDir)
		}
		if st, err := os.Stat(cfg.WheelDir); err != nil || !st.IsDir() {
			return shared.ConfigureResponse{}, shared.ConfigError("docker", "wheel_dir", nil, "%q is not a directory (%v)", cfg.WheelDir, err)
		}
	}
	for _, p := range req.AllowedPackages {
		if _, err := shared.ParseRequirement(p); err != nil || strings.Contains(p, "==") {
			return shared.ConfigureResponse{}, fmt.Errorf("docker config: allowed_packages entry %q is not a package name: %w", p, shared.ErrInvalidArgument)
		}
	}
	cfg.allowedPackages = append([]string(nil), req.AllowedPackages...)
	cfg.classes = req.Classes
	cfg.prepare, cfg.stateful = append([]string(nil), req.AllowedImports...), req.Stateful
	if err := cfg.runtimeFlags().Check(); err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("docker config: %w: %w", err, shared.ErrInvalidArgument)
	}
	switch cfg.Network {
	case NetworkNone, NetworkBridge:
	default:
		return shared.ConfigureResponse{}, shared.ConfigError("docker", "network", nil, "%q: want %q (default, MCP over stdio) or %q (MCP over HTTP published on 127.0.0.1)", cfg.Network, NetworkNone, NetworkBridge)
	}
	if err := configureEgress(&cfg, req.Egress); err != nil { // egress.go
		return shared.ConfigureResponse{}, err
	}
	dc, err := b.clientFor(cfg.Endpoint)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	if _, err := dc.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		where := "the local engine (DOCKER_HOST or /var/run/docker.sock)"
		if cfg.Endpoint != "" {
			where = fmt.Sprintf("endpoint %q", cfg.Endpoint)
		}
		return shared.ConfigureResponse{}, fmt.Errorf("docker config: the Docker engine at %s does not answer: %w: %w", where, err, shared.ErrUnavailable)
	}
	if cfg.Runtime != "" {
		info, err := dc.Info(ctx, client.InfoOptions{})
		if err != nil {
			return shared.ConfigureResponse{}, fmt.Errorf("docker config: engine info: %w: %w", err, shared.ErrUnavailable)
		}
		if _, ok := info.Info.Runtimes[cfg.Runtime]; !ok {
			known := make([]string, 0, len(info.Info.Runtimes))
			for r := range info.Info.Runtimes {
				known = append(known, r)
			}
			slices.Sort(known)
			return shared.ConfigureResponse{}, shared.ConfigError("docker", "runtime", nil,
				"the engine knows no runtime %q (it has %s); register it in the engine's daemon.json (for gVisor: \"runtimes\": {\"runsc\": {\"path\": \"/usr/bin/runsc\"}}) and restart dockerd, or use the gvisor plugin (tier 3), which runs runsc itself", cfg.Runtime, strings.Join(known, ", "))
		}
	}
	if _, err := dc.ImageInspect(ctx, cfg.Image); err != nil {
		return shared.ConfigureResponse{}, shared.ConfigError("docker", "image", shared.ErrUnavailable, "%q: %v (build it with `make image`)", cfg.Image, err)
	}
	b.mu.Lock()
	b.cfg = cfg
	b.mu.Unlock()
	b.Manager.Configure(b.settings(cfg)) // and discards warm containers of the previous configuration
	b.reapOnce(ctx)
	return shared.ConfigureResponse{}, nil
}

func (b *Backend) config() Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

// client returns the Docker client of the configured endpoint (config
// `endpoint`; "" means DOCKER_HOST or the local socket), creating it on
// first use and again when the endpoint changed. It negotiates the API
// version: moby client v0.6.x supports engine API >= 1.40, so Docker 20.10
// / API 1.41 works.
func (b *Backend) client() (*client.Client, error) {
	b.mu.Lock()
	endpoint := b.cfg.Endpoint
	b.mu.Unlock()
	return b.clientFor(endpoint)
}

// clientFor is client for an endpoint not yet in the configuration
// (Configure checks it before applying it).
func (b *Backend) clientFor(endpoint string) (*client.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.docker != nil && b.dockerAt == endpoint {
		return b.docker, nil
	}
	opts := []client.Opt{client.FromEnv}
	if endpoint != "" {
		opts = []client.Opt{client.WithHost(endpoint)}
	}
	dc, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w: %w", endpoint, err, shared.ErrUnavailable)
	}
	if b.docker != nil {
		b.docker.Close()
	}
	b.docker, b.dockerAt = dc, endpoint
	return dc, nil
}

func (b *Backend) checkCode(code string) error {
	return shared.CheckCodeSize(code, b.maxCodeBytes)
}

// Validate runs the static checks (Go, in the plugin).
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if err := b.checkCode(req.Code); err != nil {
		return shared.ValidateResponse{}, err
	}
	return shared.ValidateResponse{Findings: b.validator.CheckWith(ctx, req.Code, req.AllowedImports, validator.Features{Classes: b.config().classes})}, nil
}

// Shutdown removes every open session's container and the warm ones (the
// plugin is exiting).
func (b *Backend) Shutdown(ctx context.Context) { b.Manager.Shutdown(ctx) }

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
