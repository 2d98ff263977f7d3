// Package kubernetes is the Kubernetes backend: a session is a Pod running
// the agent runtime (package agent, the tier-2 image) in a
// hardened security context, and the plugin speaks to it exactly as tier 2
// speaks to its container: the hello line and then MCP over the
// container's stdio, here reached with `attach` through the API server
// (client-go's WebSocket executor, SPDY as the fallback) instead of
// Docker's attach. The rest is Pod lifecycle: create, wait until the
// container runs, attach, delete; the session kit (internal/session)
// does the rest, as for every session backend.
//
// The per-user tool library lives on a PersistentVolumeClaim per user
// (config storage_class) or, without a storage class, on an emptyDir that
// lives as long as the session's pod (see docs/kubernetes.md). A
// NetworkPolicy denies every ingress and egress of the session pods (with
// a network block, each pod's own policy allows the plugin's egress proxy,
// egress.go); a
// reaper deletes the pods of plugin processes that died (owner labels and
// a Lease per plugin process).
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/internal/warmpool"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
	"github.com/orqest/sandbox/validator"
)

// Version is the backend's version; the default image carries it too.
const Version = "0.1.0"

var version = Version

// Defaults of the `config {}` block.
const (
	// ImageRepo is the agent runtime's image repository (`make image`).
	ImageRepo          = "orqest/agent-runtime"
	DefaultNamespace   = "default"
	DefaultMemoryMB    = 512
	DefaultCPUs        = 1.0
	DefaultCPURequest  = 0.1
	DefaultWorkspaceMB = 64
	DefaultLibrarySize = "1Gi"
	DefaultOpenTimeout = 60 * time.Second
	// DefaultRunAsUser is the uid (and gid) the runtime runs as: any
	// non-root uid; the pod's fsGroup is the same gid so a fresh volume is
	// writable by it.
	DefaultRunAsUser = 1000
)

// DefaultImage is the runtime image of this plugin's version.
func DefaultImage() string { return ImageRepo + ":" + version }

// Config is the backend's `config {}` block.
type Config struct {
	// Kubeconfig is the kubeconfig file to use; "" means the in-cluster
	// service account when the plugin runs in a pod, else $KUBECONFIG or
	// ~/.kube/config.
	Kubeconfig string `json:"kubeconfig"`
	// Context is the kubeconfig context ("" = its current context).
	Context string `json:"context"`
	// Namespace holds the session pods, their claims and the
	// NetworkPolicy ("" = the context's namespace, else "default").
	Namespace string `json:"namespace"`
	// Image is the agent runtime image.
	Image string `json:"image"`
	// ImagePullPolicy is the container's pull policy ("IfNotPresent"
	// default, "Always" or "Never").
	ImagePullPolicy string `json:"image_pull_policy"`
	// RuntimeClass is the pods' runtimeClassName (e.g. "gvisor", "kata");
	// "" = the cluster's default runtime (runc).
	RuntimeClass string `json:"runtime_class"`
	// StorageClass names the StorageClass of the per-user library claims;
	// "" keeps the library on an emptyDir of the session's pod (it ends
	// with the session).
	StorageClass string `json:"storage_class"`
	// LibrarySize is the per-user claim's requested size (a quantity).
	LibrarySize string `json:"library_size"`
	// MemoryMB is the container's memory limit (and request), MB.
	MemoryMB int `json:"memory_mb"`
	// CPUs is the container's CPU limit, in cores.
	CPUs float64 `json:"cpus"`
	// CPURequest is the container's CPU request, in cores.
	CPURequest float64 `json:"cpu_request"`
	// WorkspaceMB is the size of the /workspace emptyDir (medium Memory).
	WorkspaceMB int `json:"workspace_mb"`
	// RunAsUser is the non-root uid (and gid) of the runtime.
	RunAsUser int64 `json:"run_as_user"`
	// OpenTimeout bounds pod creation to MCP initialize, e.g. "60s".
	OpenTimeout string `json:"open_timeout"`
	// Pool keeps warm pods (PoolConfig); nil or size 0: none.
	Pool *PoolConfig `json:"pool"`
	// Promotion is the tool library's policy (the `promotion {}` block).
	Promotion *toollib.Promotion `json:"promotion"`
	// PausedDir holds one directory per paused session (0700: its signed
	// saved state; pause.go) on the plugin's machine, kept across plugin
	// and host restarts.
	PausedDir string `json:"paused_dir"`
	// EgressListen is the IP:port on the plugin's machine where session
	// pods reach the egress proxy (egress.go); required with a network
	// block, refused without one. Port 0 picks one.
	EgressListen string `json:"egress_listen"`

	openTimeout time.Duration
	librarySize resource.Quantity
	// classes is ConfigureRequest.Classes (the runtime gets -classes).
	classes bool
	// prepare and stateful are ConfigureRequest.AllowedImports and
	// Stateful, for the runtime's flags (rtproto.RuntimeFlags).
	prepare  []string
	stateful bool
	// egress is ConfigureRequest.Egress parsed (egress.go); nil: no
	// network block, the pods have no network at all.
	egress *egress.Policy
}

// runtimeFlags are the runtime's command-line flags of cfg: the pod's
// memory limit is a cgroup's.
func (cfg Config) runtimeFlags() rtproto.RuntimeFlags {
	return rtproto.RuntimeFlags{Classes: cfg.classes, Prepare: cfg.prepare, Stateful: cfg.stateful, MemoryCgroup: true}
}

func defaultConfig() Config {
	return Config{
		Image:       DefaultImage(),
		MemoryMB:    DefaultMemoryMB,
		CPUs:        DefaultCPUs,
		CPURequest:  DefaultCPURequest,
		WorkspaceMB: DefaultWorkspaceMB,
		LibrarySize: DefaultLibrarySize,
		RunAsUser:   DefaultRunAsUser,
		openTimeout: DefaultOpenTimeout,
	}
}

// Backend is the Kubernetes sandbox. It is safe for concurrent use.
type Backend struct {
	// Sessions (Open, Close, Execute, files, the tool library, the warm
	// pool) are the kit's; session.go is its Driver.
	*session.Manager

	logger       hclog.Logger
	validator    *validator.Validator
	maxCodeBytes int
	owner        owner

	mu    sync.Mutex
	cfg   Config
	kc    *kubeClient  // nil until Configure
	lease *leaseKeeper // this process's Lease (reaper.go)
	// gateway serves the sessions' egress routes on gatewayListen (the
	// egress_listen it was started for); nil without a network block
	// (egress.go).
	gateway       *egress.Gateway
	gatewayListen string

	// egressEvents are the egress proxies' events waiting for the next
	// response (egress.go).
	egressEvents egress.Queue
	// egressLookup resolves names for the proxies (nil: the system's
	// resolver); tests stand it for DNS.
	egressLookup egress.LookupFunc
}

var _ shared.Sandbox = (*Backend)(nil)

// kubeClient is a configured connection to the cluster.
type kubeClient struct {
	rest      *rest.Config
	cs        kubernetes.Interface
	namespace string
}

// NewBackend returns a Backend with the default configuration. It does not
// touch the cluster.
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
		Impl:   &mcp.Implementation{Name: "orqest-sandbox-plugin-kubernetes", Version: version},
		Driver: driver{b},
		Logger: logger,
		Validate: func(ctx context.Context, code string, allowed []string, verdict *shared.Verdict) []shared.Finding {
			found, _ := b.validator.CheckTrusting(ctx, code, allowed, validator.Features{Classes: b.config().classes}, verdict)
			return found
		},
		Check: func(req shared.ExecuteRequest) error {
			if len(req.Dependencies) > 0 {
				return fmt.Errorf("dependencies are not installed by the kubernetes backend: %w", shared.ErrNotSupported)
			}
			return nil
		},
		MaxCodeBytes: b.maxCodeBytes,
		Sessionless:  true,
	})
	b.Manager.Configure(settings(b.cfg))
	return b
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
		shared.CapToolLibrary,
		shared.CapStatefulSessions,
		shared.CapStreaming,
		shared.CapFiles,
		shared.CapPause,  // not CapPauseMemory: the plain globals and the workspace's files come back (pause.go)
		shared.CapEgress, // a network block needs egress_listen (egress.go)
	}
	if b.config().classes {
		caps = append(caps, shared.CapClasses)
	}
	return shared.InfoResponse{
		Name:         "kubernetes",
		Tier:         2,
		Version:      version,
		APIVersions:  []int{shared.APIVersion},
		Capabilities: caps,
		ConfigSchema: configSchema(),
		Description:  "Kubernetes: one hardened Pod per session (runAsNonRoot, read-only root, capabilities dropped, seccomp RuntimeDefault, no service-account token, resource limits, optional runtimeClassName such as gvisor or kata, a NetworkPolicy denying all ingress and egress, or with a network {} block egress to the plugin's egress proxy alone) running the tier-2 agent runtime, spoken to with MCP over `attach` through the API server; the per-user tool library on a PersistentVolumeClaim per user.",
	}, nil
}

func configSchema() []shared.ConfigAttribute {
	return []shared.ConfigAttribute{
		{Name: "kubeconfig", Type: "string", Description: "kubeconfig file (default: the in-cluster service account inside a pod, else $KUBECONFIG or ~/.kube/config)"},
		{Name: "context", Type: "string", Description: "kubeconfig context (default: its current context)"},
		{Name: "namespace", Type: "string", Description: `namespace of the session pods (default: the context's, else "default")`},
		{Name: "image", Type: "string", Description: "agent runtime image (default " + DefaultImage() + "; built by `make image`, pushed or imported where the nodes find it)"},
		{Name: "image_pull_policy", Type: "string", Description: `"IfNotPresent" (default), "Always" or "Never"`},
		{Name: "runtime_class", Type: "string", Description: `the pods' RuntimeClass, e.g. "gvisor" or "kata" (default: the cluster's default runtime)`},
		{Name: "storage_class", Type: "string", Description: `StorageClass of the per-user library claims (orqest-user-<user>); "" (default) keeps the library on an emptyDir that ends with the session`},
		{Name: "library_size", Type: "string", Description: `size requested by each per-user claim (default "1Gi")`},
		{Name: "memory_mb", Type: "number", Description: "container memory limit and request, MB (default 512)"},
		{Name: "cpus", Type: "number", Description: "container CPU limit in cores (default 1)"},
		{Name: "cpu_request", Type: "number", Description: "container CPU request in cores (default 0.1)"},
		{Name: "workspace_mb", Type: "number", Description: "size of the /workspace emptyDir (medium Memory), MB (default 64)"},
		{Name: "run_as_user", Type: "number", Description: "non-root uid and gid of the runtime (default 1000)"},
		{Name: "open_timeout", Type: "string", Description: `pod creation to MCP initialize bound (default "60s")`},
		{Name: "paused_dir", Type: "string", Description: "directory on the plugin's machine of paused sessions (one 0700 directory per session id: its plain-data globals, workspace files and record, HMAC-signed with a key kept in the directory), kept across plugin and host restarts; default: the user cache directory's orqest-sandbox/kubernetes-paused"},
		{Name: "egress_listen", Type: "string", Description: `IP:port on the plugin's machine where the session pods reach the egress proxy, e.g. "10.244.0.1:0" (port 0 picks one); required with a network {} block, refused without one`},
		warmpool.Schema("pod"),
		toollib.Schema(),
	}
}

// decodeConfig decodes and checks the `config {}` block without touching
// the cluster.
func decodeConfig(raw []byte, classes bool) (Config, error) {
	cfg := defaultConfig()
	if err := shared.DecodeConfig("kubernetes", raw, &cfg); err != nil {
		return cfg, err
	}
	def := defaultConfig()
	fe := func(field, format string, a ...any) error {
		return shared.ConfigError("kubernetes", field, nil, format, a...)
	}
	if cfg.Image == "" {
		cfg.Image = def.Image
	}
	switch cfg.ImagePullPolicy {
	case "", "IfNotPresent", "Always", "Never":
	default:
		return cfg, fe("image_pull_policy", "%q: want \"IfNotPresent\", \"Always\" or \"Never\"", cfg.ImagePullPolicy)
	}
	for _, n := range []struct{ field, v string }{{"namespace", cfg.Namespace}, {"runtime_class", cfg.RuntimeClass}, {"storage_class", cfg.StorageClass}} {
		if n.v != "" && !isDNSName(n.v) {
			return cfg, fe(n.field, "%q is not a Kubernetes name (lowercase letters, digits, '-' and '.', at most 63 characters)", n.v)
		}
	}
	for _, l := range []struct {
		field string
		neg   bool
	}{{"memory_mb", cfg.MemoryMB < 0}, {"cpus", cfg.CPUs < 0}, {"cpu_request", cfg.CPURequest < 0}, {"workspace_mb", cfg.WorkspaceMB < 0}} {
		if l.neg {
			return cfg, fe(l.field, "a negative limit; leave it out for the default")
		}
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = def.MemoryMB
	}
	if cfg.MemoryMB < 64 {
		return cfg, fe("memory_mb", "%d: the runtime and one Python child need at least 64 MB", cfg.MemoryMB)
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = def.CPUs
	}
	if cfg.CPURequest == 0 {
		cfg.CPURequest = min(def.CPURequest, cfg.CPUs)
	}
	if cfg.CPURequest > cfg.CPUs {
		return cfg, fe("cpu_request", "%v is above cpus = %v", cfg.CPURequest, cfg.CPUs)
	}
	if cfg.WorkspaceMB == 0 {
		cfg.WorkspaceMB = def.WorkspaceMB
	}
	if cfg.RunAsUser == 0 {
		cfg.RunAsUser = def.RunAsUser
	}
	if cfg.RunAsUser < 0 || cfg.RunAsUser > 1<<31-1 {
		return cfg, fe("run_as_user", "%d: want a non-root uid (1 to 2147483647)", cfg.RunAsUser)
	}
	if cfg.LibrarySize == "" {
		cfg.LibrarySize = def.LibrarySize
	}
	q, err := resource.ParseQuantity(cfg.LibrarySize)
	if err != nil || q.Sign() <= 0 {
		return cfg, fe("library_size", "%q: want a positive quantity such as \"1Gi\"", cfg.LibrarySize)
	}
	cfg.librarySize = q
	cfg.openTimeout = def.openTimeout
	if cfg.OpenTimeout != "" {
		d, err := time.ParseDuration(cfg.OpenTimeout)
		if err != nil || d <= 0 {
			return cfg, fe("open_timeout", "%q: want a positive duration like \"60s\"", cfg.OpenTimeout)
		}
		cfg.openTimeout = d
	}
	if err := cfg.normalizePromotion(); err != nil { // library.go
		return cfg, err
	}
	if err := session.NormalizePausedDir("kubernetes", &cfg.PausedDir, "kubernetes-paused"); err != nil { // pause.go
		return cfg, err
	}
	if err := cfg.Pool.Normalize(); err != nil { // pool.go
		return cfg, fmt.Errorf("kubernetes config: %w", err)
	}
	cfg.classes = classes
	return cfg, nil
}

// Configure applies the `config {}` block: it connects to the cluster,
// checks that the plugin's identity may do what sessions need (a Role, see
// docs/kubernetes.md), that the runtime and storage classes exist where it
// may read them, makes sure the namespace's deny-all NetworkPolicy exists,
// serves the egress gateway of a network block (egress.go), starts this
// process's owner Lease and reaps the pods of dead owners.
func (b *Backend) Configure(ctx context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	if len(req.AllowedPackages) > 0 {
		return shared.ConfigureResponse{}, shared.ConfigError("kubernetes", "allowed_packages", shared.ErrNotSupported, "dependencies are not installed by the kubernetes backend (no wheel source in the pod)")
	}
	cfg, err := decodeConfig(req.Config, req.Classes)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	cfg.prepare, cfg.stateful = append([]string(nil), req.AllowedImports...), req.Stateful
	if err := configureEgress(&cfg, req.Egress); err != nil { // egress.go
		return shared.ConfigureResponse{}, err
	}
	if err := cfg.runtimeFlags().Check(); err != nil {
		return shared.ConfigureResponse{}, fmt.Errorf("kubernetes config: %w: %w", err, shared.ErrInvalidArgument)
	}
	kc, err := connect(cfg)
	if err != nil {
		return shared.ConfigureResponse{}, err
	}
	if err := checkCluster(ctx, kc, cfg); err != nil { // rbac.go
		return shared.ConfigureResponse{}, err
	}
	if cfg.StorageClass == "" {
		b.logger.Warn("kubernetes: no storage_class: the tool library lives on an emptyDir of each session's pod and ends with the session; set storage_class for a library per user")
	}
	if err := ensureNetworkPolicy(ctx, kc); err != nil { // pod.go
		return shared.ConfigureResponse{}, err
	}
	if err := b.startGateway(cfg); err != nil { // egress.go
		return shared.ConfigureResponse{}, err
	}
	b.mu.Lock()
	b.cfg, b.kc = cfg, kc
	b.mu.Unlock()
	if err := b.startLease(ctx, kc); err != nil { // reaper.go
		return shared.ConfigureResponse{}, fmt.Errorf("kubernetes config: %w", err)
	}
	b.Manager.Configure(settings(cfg)) // and discards the warm pods of the previous configuration
	if n, err := b.Reap(ctx); err != nil {
		b.logger.Warn("reaper", "error", err)
	} else if n > 0 {
		b.logger.Info("reaper deleted pods left by dead owners", "count", n)
	}
	return shared.ConfigureResponse{}, nil
}

func (b *Backend) config() Config {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg
}

// client returns the configured cluster client.
func (b *Backend) client() (*kubeClient, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kc == nil {
		return nil, fmt.Errorf("not configured (Configure connects to the cluster): %w", shared.ErrFailedPrecondition)
	}
	return b.kc, nil
}

// Validate runs the static checks (Go, in the plugin).
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if err := shared.CheckCodeSize(req.Code, b.maxCodeBytes); err != nil {
		return shared.ValidateResponse{}, err
	}
	return shared.ValidateResponse{Findings: b.validator.CheckWith(ctx, req.Code, req.AllowedImports, validator.Features{Classes: b.config().classes})}, nil
}

// settings are the session settings of cfg: its open timeout, its warm
// pool and the hello line's promotion policy.
func settings(cfg Config) session.Settings {
	return session.Settings{
		OpenTimeout: cfg.openTimeout,
		Pool:        cfg.Pool,
		Hello:       func(h *rtproto.Hello) { h.Promotion = cfg.Promotion },
	}
}

// Shutdown deletes every open session's pod and the warm ones, and this
// process's Lease (the plugin is exiting).
func (b *Backend) Shutdown(ctx context.Context) {
	b.Manager.Shutdown(ctx)
	b.stopGateway() // egress.go
	b.stopLease(ctx)
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
