// Package session is what every session backend shares. A backend (a
// Docker container, a gVisor sandbox, a Kubernetes pod per session) only
// starts an agent, hands back a way to connect to it, and stops it: a
// Driver and its Agents. The Manager does the rest, once for every
// backend: the registry of open sessions (Open, Close, Shutdown), Execute
// (request checks, static validation, the agent call, streaming), the
// session workspace's files, the tool library's calls, a warm pool of
// agents started ahead of demand, health (an agent's death is noticed and
// its remains removed) and reopen: when a session's agent dies (killed,
// out of memory, its engine restarted), the call in flight fails with an
// error naming the death, and the next call on the same session id gets a
// fresh agent, for the same user and with the same persistent data, and
// an execution result marked StateLost.
//
// Every agent is the same program (the agent runtime) and is spoken to the
// same way, through internal/rtclient: a hello line carrying the session's
// secret, then MCP, with a freshly minted token on every call.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/warmpool"
	"github.com/orqest/sandbox/shared"
)

// Agent is one started agent runtime: a container, a pod, a gVisor
// sandbox. It waits for its hello line until Connect.
type Agent interface {
	// Name says in errors what the agent runs in, e.g. "the session
	// container orqest-alice-s-1a2b".
	Name() string
	// Done is closed when the agent has ended, for whatever reason: it
	// was stopped, killed, ran out of memory or crashed.
	Done() <-chan struct{}
	// Connect sends hello and initializes MCP with client over the
	// agent's transport (ConnectStdio for one spoken to over its stdio).
	Connect(ctx context.Context, client *mcp.Client, hello rtproto.Hello) (*mcp.ClientSession, error)
	// Stop ends the agent and removes everything it holds except the
	// user's persistent data. It is safe to call more than once and
	// returns when the agent is gone.
	Stop(ctx context.Context) error
}

// Driver starts agents: the one thing a session backend must write.
type Driver interface {
	// Start starts an agent for user, labelled label (a session id, or a
	// "warm-" label for one of the pool), with the user's persistent data
	// mounted. It returns once the agent waits for its hello line.
	Start(ctx context.Context, user, label string) (Agent, error)
}

// Config is what a backend gives New once.
type Config struct {
	// Impl names the plugin in its MCP handshake with the agents.
	Impl *mcp.Implementation
	// Driver starts the backend's agents.
	Driver Driver
	// Logger gets the sessions' lifecycle (nil: none).
	Logger hclog.Logger
	// Validate runs the backend's static checks on a body under an import
	// allowlist (nil: none, the agent checks again either way). verdict is
	// the request's (shared.ExecuteRequest.Verdict, nil when none): a
	// Validate that trusts it when it matches exactly
	// (validator.Validator.CheckTrusting) skips the check.
	Validate func(ctx context.Context, code string, allowedImports []string, verdict *shared.Verdict) []shared.Finding
	// Check is the backend's own refusal of a request before anything runs,
	// e.g. dependencies it cannot install (nil: none).
	Check func(req shared.ExecuteRequest) error
	// MaxCodeBytes and MaxArgsBytes cap a request's code and JSON args.
	MaxCodeBytes, MaxArgsBytes int
	// Sessionless makes Execute without a SessionID run in a temporary
	// session opened for the call and closed after it. Without it such a
	// call is refused: the backend runs sessionless calls itself.
	Sessionless bool
	// Available, when set, says whether sessions are offered at all (an
	// error such as shared.ErrNotSupported when they are not); every
	// session call checks it first.
	Available func() error
	// StopTimeout bounds the removal of one agent that is not stopped by
	// a caller's context: a dead one, a temporary session's (default 60s).
	StopTimeout time.Duration
}

// Settings are the parts of a session's start that follow the backend's
// configuration; Configure replaces them.
type Settings struct {
	// OpenTimeout bounds an agent's start up to MCP initialize (default
	// 60s).
	OpenTimeout time.Duration
	// Pool keeps started agents ahead of demand, one per recent user (nil:
	// no pool). It must be normalized.
	Pool *warmpool.Config
	// Hello adds the backend's fields (promotion policy, packages) to an
	// agent's hello line.
	Hello func(*rtproto.Hello)
}

// Manager keeps a backend's sessions. It implements shared.Sandbox's
// session calls (Open, Close, Execute, ExecuteStream), shared.SessionTools,
// shared.SessionToolStreamer and shared.FileStore; a backend embeds it and
// adds Info, Configure and Validate. It is safe for concurrent use.
type Manager struct {
	cfg  Config
	log  hclog.Logger
	pool *warmpool.Pool[warm]

	mu       sync.Mutex
	settings Settings
	sessions map[string]*session // nil value: reserved while it opens
	shutdown bool
}

// New returns a Manager for cfg with default Settings until Configure.
func New(cfg Config) *Manager {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.MaxArgsBytes <= 0 {
		cfg.MaxArgsBytes = shared.DefaultMaxArgsBytes
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, sessions: map[string]*session{}}
	m.pool = warmpool.New(func(ctx context.Context, w warm) error { return w.Stop(ctx) }, cfg.Logger)
	return m
}

// Defaults of Config and Settings.
const (
	DefaultStopTimeout = 60 * time.Second
	DefaultOpenTimeout = 60 * time.Second
)

// Configure applies s to the sessions opened from now on and discards the
// warm agents started under the previous settings.
func (m *Manager) Configure(s Settings) {
	m.mu.Lock()
	m.settings = s
	m.mu.Unlock()
	m.pool.Discard()
}

func (m *Manager) current() Settings {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.settings
	if s.OpenTimeout <= 0 {
		s.OpenTimeout = DefaultOpenTimeout
	}
	return s
}

// warm is an Agent of the pool.
type warm struct{ Agent }

// Dead makes warm a warmpool.Item.
func (w warm) Dead() bool { return isClosed(w.Done()) }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// session is one open session: its id, its user, the secret its tokens
// are signed with, and the agent that serves it now.
type session struct {
	id, user string
	secret   []byte
	opened   time.Time

	mu     sync.Mutex // held while the agent is replaced
	cur    *conn      // nil once closed
	lost   bool       // the agent was replaced: the next execution result says StateLost
	closed bool
	paused bool // saved by the Driver (Pauser) and its agent ended: calls are refused until Resume
	busy   int  // calls in flight (between serving and their release)
}

// conn is one agent bound to a session: its MCP connection and the
// routing of its streamed output.
type conn struct {
	agent   Agent
	mcp     *mcp.ClientSession
	streams *rtclient.Streams

	stopOnce sync.Once
	stopping chan struct{} // closed when a stop begins
	stopErr  error
	pausing  atomic.Bool // a pause is ending the agent: its end is no death
}

func (c *conn) dead() bool { return isClosed(c.agent.Done()) }

// stop closes the MCP connection and stops the agent, once.
func (c *conn) stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		close(c.stopping)
		if c.mcp != nil {
			go c.mcp.Close() // never blocks the removal
		}
		c.stopErr = c.agent.Stop(ctx)
	})
	return c.stopErr
}

func (s *session) target(c *conn) rtclient.Target {
	return rtclient.Target{MCP: c.mcp, Secret: s.secret, User: s.user, Session: s.id, Name: c.agent.Name(), Gone: c.agent.Done(), Streams: c.streams}
}

// Open starts a session: an agent for req.UserID. An empty SessionID gets
// "s-" and random hex, returned in the response; the ids are checked
// before anything starts. An id already open is ErrFailedPrecondition.
func (m *Manager) Open(ctx context.Context, req shared.OpenRequest) (shared.OpenResponse, error) {
	if err := m.available(); err != nil {
		return shared.OpenResponse{}, fmt.Errorf("open: %w", err)
	}
	if req.SessionID == "" {
		req.SessionID = "s-" + randomHex(8)
	}
	if err := errors.Join(rtproto.CheckID("user_id", req.UserID), rtproto.CheckID("session_id", req.SessionID)); err != nil {
		return shared.OpenResponse{}, fmt.Errorf("open: %w: %w", err, shared.ErrInvalidArgument)
	}
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return shared.OpenResponse{}, fmt.Errorf("open: the plugin is shutting down: %w", shared.ErrUnavailable)
	}
	if _, ok := m.sessions[req.SessionID]; ok {
		m.mu.Unlock()
		return shared.OpenResponse{}, fmt.Errorf("open: session %q is already open: %w", req.SessionID, shared.ErrFailedPrecondition)
	}
	m.sessions[req.SessionID] = nil
	m.mu.Unlock()

	s := &session{id: req.SessionID, user: req.UserID, secret: newSecret(), opened: time.Now()}
	c, err := m.start(ctx, s)
	m.mu.Lock()
	late := err == nil && m.shutdown
	if err != nil || late {
		delete(m.sessions, s.id)
	} else {
		s.cur = c
		m.sessions[s.id] = s
	}
	m.mu.Unlock()
	if late {
		// Shutdown ran while the agent started: it took no note of it.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
		defer cancel()
		_ = c.stop(sctx)
		return shared.OpenResponse{}, fmt.Errorf("open: the plugin is shutting down: %w", shared.ErrUnavailable)
	}
	if err != nil {
		return shared.OpenResponse{}, err
	}
	m.log.Debug("session open", "session", s.id, "user", s.user, "agent", c.agent.Name())
	return shared.OpenResponse{SessionID: s.id}, nil
}

// Close ends the session's agent; the user's persistent data stays.
func (m *Manager) Close(ctx context.Context, req shared.CloseRequest) (shared.CloseResponse, error) {
	if err := m.available(); err != nil {
		return shared.CloseResponse{}, fmt.Errorf("close: %w", err)
	}
	if err := rtproto.CheckID("session_id", req.SessionID); err != nil {
		return shared.CloseResponse{}, fmt.Errorf("close: %w: %w", err, shared.ErrInvalidArgument)
	}
	m.mu.Lock()
	s := m.sessions[req.SessionID]
	if s != nil {
		delete(m.sessions, req.SessionID)
	}
	m.mu.Unlock()
	if s == nil {
		// A session paused by an earlier process of the plugin is known
		// only by what it saved.
		if found, err := m.forgetPaused(req.SessionID); found || err != nil {
			return shared.CloseResponse{}, err
		}
		return shared.CloseResponse{}, fmt.Errorf("close: %w", notOpen(req.SessionID))
	}
	s.mu.Lock()
	paused := s.paused
	s.mu.Unlock()
	err := s.end(ctx)
	if paused {
		if _, ferr := m.forgetPaused(s.id); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return shared.CloseResponse{}, err
}

// end marks s closed and stops its agent.
func (s *session) end(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.stop(ctx)
}

// Shutdown stops the pool's refills, then every warm agent and every open
// session's (the plugin is exiting). Opens after it are refused.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	m.shutdown = true
	var all []*session
	for id, s := range m.sessions {
		if s != nil {
			all = append(all, s)
			delete(m.sessions, id)
		}
	}
	m.mu.Unlock()
	m.pool.Drain()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.end(ctx); err != nil {
				m.log.Warn("shutdown: stopping a session's agent", "session", s.id, "error", err)
			}
		}()
	}
	wg.Wait()
}

// Info describes one open session.
type Info struct {
	ID, User string
	// Agent names what serves it now ("" while none does: its agent died
	// and the next call starts one).
	Agent  string
	Opened time.Time
}

// Sessions lists the open sessions.
func (m *Manager) Sessions() []Info {
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if s != nil {
			all = append(all, s)
		}
	}
	m.mu.Unlock()
	out := make([]Info, 0, len(all))
	for _, s := range all {
		in := Info{ID: s.id, User: s.user, Opened: s.opened}
		s.mu.Lock()
		if s.cur != nil && !s.cur.dead() {
			in.Agent = s.cur.agent.Name()
		}
		s.mu.Unlock()
		out = append(out, in)
	}
	return out
}

// Agent returns the agent serving open session id now (for a backend's
// own needs and tests: its concrete type is the Driver's); an agent that
// died is returned as it is.
func (m *Manager) Agent(id string) (Agent, error) {
	s, err := m.lookup(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil, notOpen(id)
	}
	return s.cur.agent, nil
}

// Warm reports whether a started agent of user waits in the pool.
func (m *Manager) Warm(user string) bool { return m.pool.Has(user) }

// Warming reports how many agents wait in the pool.
func (m *Manager) Warming() int { return m.pool.Len() }

func (m *Manager) available() error {
	if m.cfg.Available == nil {
		return nil
	}
	return m.cfg.Available()
}

// lookup returns open session id.
func (m *Manager) lookup(id string) (*session, error) {
	if err := m.available(); err != nil {
		return nil, err
	}
	if err := rtproto.CheckID("session_id", id); err != nil {
		return nil, fmt.Errorf("%w: %w", err, shared.ErrInvalidArgument)
	}
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil {
		return nil, notOpen(id)
	}
	return s, nil
}

func notOpen(id string) error {
	return fmt.Errorf("no open session %q (call Open first): %w", id, shared.ErrSessionNotFound)
}

// serving returns the agent serving s (the caller releases it with
// s.release when its call has ended: a session with calls in flight is
// not paused), starting a fresh one when the one it
// had died (reopen): the session's id, user, secret and persistent data
// stay, its in-memory state and workspace do not, and the next execution
// result says so (StateLost).
func (m *Manager) serving(ctx context.Context, s *session) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, notOpen(s.id)
	}
	if s.paused {
		return nil, errPaused(s.id)
	}
	if s.cur != nil && !s.cur.dead() {
		s.busy++
		return s.cur, nil
	}
	if old := s.cur; old != nil {
		s.cur = nil
		go m.remove(old, s)
	}
	c, err := m.start(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("session %q: its agent had ended and a fresh one could not be started: %w", s.id, err)
	}
	s.cur, s.lost = c, true
	s.busy++
	m.log.Info("session reopened: its agent had ended, a fresh one serves it (state lost, persistent data kept)", "session", s.id, "user", s.user, "agent", c.agent.Name())
	return c, nil
}

// release ends a call that serving let in.
func (s *session) release() {
	s.mu.Lock()
	s.busy--
	s.mu.Unlock()
}

// takeLost reports, once, that s's agent was replaced since its last
// execution, if c is still its agent.
func (s *session) takeLost(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lost || s.cur != c {
		return false
	}
	s.lost = false
	return true
}

// start gives s an agent: a warm one of the pool when one waits for the
// user (bound now), else a new one; with a pool it then starts the user's
// next warm agent in the background.
func (m *Manager) start(ctx context.Context, s *session) (_ *conn, retErr error) {
	st := m.current()
	ctx, cancel := context.WithTimeout(ctx, st.OpenTimeout)
	defer cancel()
	if n := st.Pool.Users(); n > 0 {
		defer func() {
			if retErr == nil {
				m.refill(st, s.user)
			}
		}()
		if w, ok := m.pool.Take(s.user); ok {
			c, err := m.bind(ctx, st, w.Agent, s)
			if err == nil {
				return c, nil
			}
			m.log.Warn("a warm agent could not be bound; starting a new one", "user", s.user, "error", err)
		}
	}
	a, err := m.cfg.Driver.Start(ctx, s.user, s.id)
	if err != nil {
		return nil, err
	}
	return m.bind(ctx, st, a, s)
}

// refill starts a warm agent for user in the background.
func (m *Manager) refill(st Settings, user string) {
	m.pool.Refill(user, st.Pool.Users(), st.Pool.Idle(), st.OpenTimeout, func(ctx context.Context) (warm, error) {
		a, err := m.cfg.Driver.Start(ctx, user, "warm-"+randomHex(4))
		return warm{a}, err
	})
}

// bind makes agent a serve s: the hello line (the session's secret, user
// and id, the backend's fields) and MCP initialize. An agent that cannot
// be bound is stopped.
func (m *Manager) bind(ctx context.Context, st Settings, a Agent, s *session) (*conn, error) {
	hello := rtproto.Hello{Secret: s.secret, User: s.user, Session: s.id}
	if st.Hello != nil {
		st.Hello(&hello)
	}
	c := &conn{agent: a, streams: &rtclient.Streams{}, stopping: make(chan struct{})}
	client := mcp.NewClient(m.cfg.Impl, c.streams.Options())
	type bound struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan bound, 1)
	go func() {
		cs, err := a.Connect(ctx, client, hello)
		done <- bound{cs, err}
	}()
	var err error
	select {
	case r := <-done:
		c.mcp, err = r.cs, r.err
		if err != nil {
			err = fmt.Errorf("open: %s: %w", a.Name(), err)
		}
	case <-a.Done():
		err = fmt.Errorf("open: %s ended before its agent answered: %w", a.Name(), shared.ErrUnavailable)
	case <-ctx.Done():
		err = fmt.Errorf("open: the agent in %s did not answer within %v: %w: %w", a.Name(), st.OpenTimeout, ctx.Err(), shared.ErrUnavailable)
	}
	if err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StopTimeout)
		defer cancel()
		if serr := a.Stop(sctx); serr != nil {
			m.log.Warn("open failed; removing its agent", "agent", a.Name(), "error", serr)
		}
		return nil, err
	}
	go m.watch(c, s)
	return c, nil
}

// watch waits for c's agent to end; one that ends without a stop (killed,
// out of memory, crashed) is logged and its remains removed at once. The
// session keeps its id: its next call reopens it.
func (m *Manager) watch(c *conn, s *session) {
	select {
	case <-c.stopping:
		return
	case <-c.agent.Done():
	}
	select {
	case <-c.stopping:
		return
	default:
	}
	if c.pausing.Load() {
		return // Pause ended it; a pause that fails removes it itself
	}
	m.log.Warn("a session's agent ended on its own (killed, out of memory or crashed); its next call starts a fresh one", "session", s.id, "user", s.user, "agent", c.agent.Name())
	m.remove(c, s)
}

// remove stops c, bounded by StopTimeout.
func (m *Manager) remove(c *conn, s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StopTimeout)
	defer cancel()
	if err := c.stop(ctx); err != nil {
		m.log.Warn("removing a dead agent", "session", s.id, "agent", c.agent.Name(), "error", err)
	}
}

func newSecret() []byte {
	b := make([]byte, rtproto.MinSecretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (Go ≥ 1.24 panics instead)
	return b
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
