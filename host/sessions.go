package host

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/orqest/sandbox/shared"
)

// The host's record of the sessions opened through Sandbox.Open, for
// every session backend alike (the plugin keeps the sessions themselves):
//
//   - lifecycle: one reaper goroutine per Host closes a session idle for
//     its sandbox's idle_timeout or open for its max_lifetime (sessionconfig.go);
//   - caps: an Open beyond max_sessions (host-wide) or
//     max_sessions_per_user closes the least recently used session of
//     that scope idle for reclaim_idle_after, or is refused;
//   - reopen: a call on a session whose backend session is gone (the
//     plugin was relaunched since it opened, the plugin no longer knows
//     it, or the host reclaimed it) opens a new backend session with the
//     same id and user and runs the call there once more; an execution's
//     result then says StateLost.
//
// A session the host reclaimed stays as a tombstone (state "reclaimed",
// holding nothing in the backend) so that its id keeps working, until it is
// closed explicitly or max_lifetime has passed since it was reclaimed.

// SessionState is the state of a session the host tracks.
type SessionState string

// States of SessionInfo.
const (
	// SessionOpen: the backend holds the session (or will again at the next
	// call, after a plugin relaunch).
	SessionOpen SessionState = "open"
	// SessionClosing: the host is closing it (idle, lifetime, capacity).
	SessionClosing SessionState = "closing"
	// SessionReclaimed: the host closed it; the next call on its id opens
	// a new backend session (the result says StateLost).
	SessionReclaimed SessionState = "reclaimed"
	// sessionGone: closed explicitly and forgotten; a call still holding
	// the record does not reopen it.
	sessionGone SessionState = "closed"
)

// Why the host closed a session (SessionInfo.Reason, the reason label of
// orqest_sessions_reclaimed_total).
const (
	ReclaimIdle     = "idle"     // unused for the sandbox's idle_timeout
	ReclaimLifetime = "lifetime" // open for the sandbox's max_lifetime
	ReclaimCapacity = "capacity" // made room for an Open at max_sessions or max_sessions_per_user
)

// Why the host reopened a session (the cause label of
// orqest_sessions_reopened_total and the audit record).
const (
	ReopenRelaunch  = "relaunch"  // the plugin was relaunched since the session opened
	ReopenLost      = "lost"      // the plugin answered that it does not know the session
	ReopenReclaimed = "reclaimed" // the host had reclaimed it
)

// Audit records of the session lifecycle, written to the audit log
// directly (as EventExecution is):
//
//	sandbox.session_reclaimed  {session, user, reason, idle_ms, age_ms, error}
//	sandbox.session_reopened   {session, user, cause}
//	sandbox.session_refused    {user, limit, max, open}
const (
	EventSessionReclaimed = "sandbox.session_reclaimed"
	EventSessionReopened  = "sandbox.session_reopened"
	EventSessionRefused   = "sandbox.session_refused"
)

// SessionInfo describes one session the host tracks (Host.Sessions).
type SessionInfo struct {
	ID      string `json:"id"`
	Sandbox string `json:"sandbox"`
	User    string `json:"user"`
	// Opened is when its current backend session opened (a reopen
	// starts a new one).
	Opened time.Time `json:"opened"`
	// LastUsed is when a call on it last began or ended.
	LastUsed time.Time `json:"last_used"`
	// IdleFor is how long it has had no call (0 while one is in flight).
	IdleFor time.Duration `json:"idle_for"`
	// InCall counts its calls in flight.
	InCall int          `json:"in_call"`
	State  SessionState `json:"state"`
	// Reason says why the host closed it (ReclaimIdle, ...), for a
	// reclaimed session.
	Reason string `json:"reason,omitempty"`
	// Reclaimed is when the host closed it.
	Reclaimed time.Time `json:"reclaimed,omitzero"`
	// Reopens counts the backend sessions opened again under its id.
	Reopens int `json:"reopens"`
}

// SessionLimitError is the refusal of an Open (or of the reopening of a
// reclaimed session) at a cap with no session idle long enough to make
// room. It matches shared.ErrFailedPrecondition.
type SessionLimitError struct {
	// Limit is the attribute that capped it: "max_sessions" or
	// "max_sessions_per_user".
	Limit string
	// Max is its value; Open how many sessions of its scope were open.
	Max, Open int
	// User is the user of a per-user cap.
	User string
	// ReclaimIdleAfter and IdleTimeout say when a place frees itself.
	ReclaimIdleAfter, IdleTimeout time.Duration
}

// Error names the limit, how many sessions are open and how to free one.
func (e *SessionLimitError) Error() string {
	scope := fmt.Sprintf("max_sessions %d reached: %d sessions are open on this server", e.Max, e.Open)
	if e.Limit == "max_sessions_per_user" {
		scope = fmt.Sprintf("max_sessions_per_user %d for user %q reached: %d of its sessions are open", e.Max, e.User, e.Open)
	}
	return fmt.Sprintf("cannot open a session: %s, none idle for reclaim_idle_after (%s); "+
		"free a place by closing one (the close_session tool, or `orqest-sandbox session close NAME`), "+
		"or retry once one has been idle for %s (the server closes a session idle for idle_timeout, %s)",
		scope, e.ReclaimIdleAfter, e.ReclaimIdleAfter, e.IdleTimeout)
}

// Unwrap makes errors.Is(err, shared.ErrFailedPrecondition) true.
func (e *SessionLimitError) Unwrap() error { return shared.ErrFailedPrecondition }

// sessionKey names a session: ids are the backend's, so per sandbox.
type sessionKey struct{ sandbox, id string }

// sessionRecord is the host's record of one session. The table's mutex
// guards every field but op.
type sessionRecord struct {
	sb   *Sandbox
	id   string
	user string

	opened, lastUsed time.Time
	inFlight         int
	gen              int // launch generation its backend session opened under
	epoch            int // one more at every reopen
	state            SessionState
	reason           string
	reclaimedAt      time.Time
	reopens          int

	// op orders the changes of the backend session (close by the host,
	// reopen, explicit close): one at a time.
	op sync.Mutex
}

func (r *sessionRecord) infoLocked(now time.Time) SessionInfo {
	idle := now.Sub(r.lastUsed)
	if r.inFlight > 0 || idle < 0 {
		idle = 0
	}
	return SessionInfo{ID: r.id, Sandbox: r.sb.Name(), User: r.user, Opened: r.opened, LastUsed: r.lastUsed,
		IdleFor: idle, InCall: r.inFlight, State: r.state, Reason: r.reason, Reclaimed: r.reclaimedAt, Reopens: r.reopens}
}

// sessionTable is a Host's record of its sessions and the reaper that
// closes expired ones.
type sessionTable struct {
	h      *Host
	limits SessionLimits

	mu         sync.Mutex
	recs       map[sessionKey]*sessionRecord
	pending    map[string]int // user -> Opens holding a place, not recorded yet
	pendingAll int
	closed     bool

	started bool
	kick    chan struct{}
	ctx     context.Context // the reaper's; canceled by close
	cancel  context.CancelFunc
	done    chan struct{}
}

// maxTombstonesPer bounds the tombstones kept: this many per place of
// max_sessions; the oldest go first.
const maxTombstonesPer = 16

func newSessionTable(h *Host, limits SessionLimits) *sessionTable {
	ctx, cancel := context.WithCancel(context.Background())
	return &sessionTable{h: h, limits: limits, recs: map[sessionKey]*sessionRecord{}, pending: map[string]int{},
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// startLocked starts the reaper on the first recorded session; t.mu is
// held.
func (t *sessionTable) startLocked() {
	if t.started || t.closed {
		return
	}
	t.started = true
	go t.run()
}

// wake makes the reaper look again now.
func (t *sessionTable) wake() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// close stops the reaper and waits for it; later Opens are refused.
func (t *sessionTable) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	started := t.started
	t.mu.Unlock()
	t.cancel()
	if started {
		<-t.done
	}
}

// countLocked returns the open sessions (and the places Opens hold) of
// user and of the whole host; t.mu is held.
func (t *sessionTable) countLocked(user string) (ofUser, all int) {
	for _, r := range t.recs {
		if r.state != SessionOpen {
			continue
		}
		all++
		if r.user == user {
			ofUser++
		}
	}
	return ofUser + t.pending[user], all + t.pendingAll
}

// victimLocked returns the least recently used open session that match
// accepts, has no call in flight and has been idle for reclaim_idle_after,
// or nil; t.mu is held. The victim is marked SessionClosing and its op is
// held (a session whose op another holds is not taken): the caller
// reclaims it, or gives it back with spare.
func (t *sessionTable) victimLocked(now time.Time, match func(*sessionRecord) bool) *sessionRecord {
	var cands []*sessionRecord
	for _, r := range t.recs {
		if r.state != SessionOpen || r.inFlight > 0 || now.Sub(r.lastUsed) < t.limits.ReclaimIdleAfter || !match(r) {
			continue
		}
		cands = append(cands, r)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].lastUsed.Before(cands[j].lastUsed) })
	for _, r := range cands {
		if t.closingLocked(r) {
			return r
		}
	}
	return nil
}

// closingLocked marks r SessionClosing if its op can be taken at once,
// and reports whether it was; t.mu is held. Taking op under t.mu never
// waits, so the order (op, then t.mu) of every other path holds.
func (t *sessionTable) closingLocked(r *sessionRecord) bool {
	if !r.op.TryLock() {
		return false
	}
	r.state = SessionClosing
	return true
}

// spareLocked gives back a victim that is not needed after all; t.mu is
// held.
func spareLocked(r *sessionRecord) {
	r.state = SessionOpen
	r.op.Unlock()
}

// reserve holds a place for one more open session of user on sb: at a
// cap it closes the least recently used session of the capped scope idle
// for reclaim_idle_after (before it returns), else it refuses with a
// *SessionLimitError. release gives the place back; call it once the
// session is recorded (or its Open failed).
func (t *sessionTable) reserve(ctx context.Context, sb *Sandbox, user string) (release func(), err error) {
	t.mu.Lock()
	var victims []*sessionRecord
	now := time.Now()
	for {
		if t.closed {
			err = errHostClosed
			break
		}
		ofUser, all := t.countLocked(user)
		var lim *SessionLimitError
		var match func(*sessionRecord) bool
		switch {
		case ofUser >= t.limits.MaxSessionsPerUser:
			lim = &SessionLimitError{Limit: "max_sessions_per_user", Max: t.limits.MaxSessionsPerUser, Open: ofUser, User: user}
			match = func(r *sessionRecord) bool { return r.user == user }
		case all >= t.limits.MaxSessions:
			lim = &SessionLimitError{Limit: "max_sessions", Max: t.limits.MaxSessions, Open: all}
			match = func(*sessionRecord) bool { return true }
		}
		if lim == nil {
			break
		}
		v := t.victimLocked(now, match)
		if v == nil {
			lim.ReclaimIdleAfter, lim.IdleTimeout = t.limits.ReclaimIdleAfter, sb.lifecycle.IdleTimeout
			err = lim
			break
		}
		victims = append(victims, v)
	}
	if err != nil {
		for _, v := range victims { // not needed after all
			spareLocked(v)
		}
		t.mu.Unlock()
		var lim *SessionLimitError
		if errors.As(err, &lim) {
			t.refused(sb, user, lim)
		}
		return nil, err
	}
	t.pending[user]++
	t.pendingAll++
	t.mu.Unlock()
	for _, v := range victims {
		// The caller waits for the room it asked for, but its ctx ending
		// must not leave a victim half closed.
		t.reclaim(context.WithoutCancel(ctx), v, ReclaimCapacity)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			if t.pending[user]--; t.pending[user] <= 0 {
				delete(t.pending, user)
			}
			t.pendingAll--
			t.mu.Unlock()
		})
	}, nil
}

// add records a session sb opened for user under launch generation gen
// (replacing a tombstone of the same id).
func (t *sessionTable) add(sb *Sandbox, id, user string, gen int) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recs[sessionKey{sb.Name(), id}] = &sessionRecord{sb: sb, id: id, user: user, opened: now, lastUsed: now, gen: gen, state: SessionOpen}
	t.startLocked()
	t.wake()
}

// lookup returns the record of session id of sb, nil when the host does
// not track it.
func (t *sessionTable) lookup(sb *Sandbox, id string) *sessionRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recs[sessionKey{sb.Name(), id}]
}

// forget drops r (an explicit close); a call still holding it does not
// reopen it.
func (t *sessionTable) forget(r *sessionRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k := (sessionKey{r.sb.Name(), r.id}); t.recs[k] == r {
		delete(t.recs, k)
	}
	r.state = sessionGone
}

// infos lists the sessions the host tracks (of sandbox, or all when
// sandbox is ""), by sandbox, then opening time.
func (t *sessionTable) infos(sandbox string) []SessionInfo {
	now := time.Now()
	t.mu.Lock()
	out := make([]SessionInfo, 0, len(t.recs))
	for k, r := range t.recs {
		if sandbox == "" || k.sandbox == sandbox {
			out = append(out, r.infoLocked(now))
		}
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Sandbox != out[j].Sandbox {
			return out[i].Sandbox < out[j].Sandbox
		}
		if !out[i].Opened.Equal(out[j].Opened) {
			return out[i].Opened.Before(out[j].Opened)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// openIn counts the open sessions of sandbox (the orqest_sessions_open
// gauge).
func (t *sessionTable) openIn(sandbox string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, r := range t.recs {
		if k.sandbox == sandbox && r.state == SessionOpen {
			n++
		}
	}
	return n
}

// run is the reaper: it closes what expired, then sleeps until the next
// expiry (or a wake-up), until close.
func (t *sessionTable) run() {
	defer close(t.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := t.sweep(t.ctx)
		wait := time.Hour
		if !next.IsZero() {
			wait = min(max(time.Until(next), 10*time.Millisecond), time.Hour)
		}
		timer.Reset(wait)
		select {
		case <-t.ctx.Done():
			return
		case <-t.kick:
		case <-timer.C:
		}
	}
}

// reaperParallel bounds the sessions the reaper closes at once.
const reaperParallel = 4

// sweep closes the open sessions past their idle_timeout or max_lifetime
// (none with a call in flight), drops the tombstones past max_lifetime,
// and returns when to look again (zero: nothing to wait for).
func (t *sessionTable) sweep(ctx context.Context) time.Time {
	type expiry struct {
		r      *sessionRecord
		reason string
	}
	var due []expiry
	var next time.Time
	consider := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	now := time.Now()
	t.mu.Lock()
	for k, r := range t.recs {
		lc := r.sb.lifecycle
		switch r.state {
		case SessionOpen:
			if r.inFlight > 0 {
				consider(now.Add(lc.IdleTimeout)) // its call's end sets lastUsed, and wakes the reaper when its lifetime is over
				continue
			}
			reason := ""
			switch {
			case now.Sub(r.opened) >= lc.MaxLifetime:
				reason = ReclaimLifetime
			case now.Sub(r.lastUsed) >= lc.IdleTimeout:
				reason = ReclaimIdle
			}
			switch {
			case reason != "" && t.closingLocked(r):
				due = append(due, expiry{r, reason})
			case reason != "":
				consider(now.Add(time.Second)) // being closed or opened again: look once more soon
			default:
				consider(r.lastUsed.Add(lc.IdleTimeout))
				consider(r.opened.Add(lc.MaxLifetime))
			}
		case SessionPaused:
			// Holds nothing: it stays until resumed or closed.
		case SessionReclaimed:
			if now.Sub(r.reclaimedAt) >= lc.MaxLifetime {
				delete(t.recs, k)
			} else {
				consider(r.reclaimedAt.Add(lc.MaxLifetime))
			}
		}
	}
	t.mu.Unlock()
	sem := make(chan struct{}, reaperParallel)
	var wg sync.WaitGroup
	for _, e := range due {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			t.reclaim(ctx, e.r, e.reason)
		}()
	}
	wg.Wait()
	return next
}

// reclaimTimeout bounds the plugin's Close of a session the host
// reclaims.
const reclaimTimeout = time.Minute

// reclaim closes r's backend session and leaves r as a tombstone; r is
// SessionClosing and its op is held (closingLocked), which reclaim
// releases. A plugin that fails to close it is logged: the session still
// counts as reclaimed (the backend's own cleanup, or its process's end,
// frees what it held).
func (t *sessionTable) reclaim(ctx context.Context, r *sessionRecord, reason string) {
	defer r.op.Unlock()
	if reason == ReclaimIdle && r.sb.lifecycle.OnIdle == OnIdlePause && t.pauseIdle(ctx, r) {
		return
	}
	t.mu.Lock()
	idle, age := time.Since(r.lastUsed), time.Since(r.opened)
	t.mu.Unlock()

	sb := r.sb
	var err error
	if gen, ok := sb.inst.liveGen(); ok && gen == r.gen {
		cctx, cancel := context.WithTimeout(ctx, reclaimTimeout)
		err = sb.inst.do(cctx, "Close", func(p shared.Sandbox) error {
			_, err := p.Close(cctx, shared.CloseRequest{SessionID: r.id})
			return err
		})
		cancel()
		if errors.Is(err, shared.ErrNotFound) {
			err = nil // the backend had lost it already
		}
	} // else: its plugin process is gone, and the session with it

	now := time.Now()
	t.mu.Lock()
	r.state, r.reason, r.reclaimedAt = SessionReclaimed, reason, now
	t.dropOldTombstonesLocked()
	t.mu.Unlock()

	h := t.h
	h.metrics.reclaimed.WithLabelValues(sb.Name(), reason).Inc()
	if err != nil {
		h.opts.logger.Warn("session reclaimed; the plugin failed to close it", "sandbox", sb.Name(), "session", r.id,
			"user", r.user, "reason", reason, "error", err)
	} else {
		h.opts.logger.Info("session reclaimed", "sandbox", sb.Name(), "session", r.id, "user", r.user,
			"reason", reason, "idle_ms", idle.Milliseconds(), "age_ms", age.Milliseconds())
	}
	rec := map[string]any{"session": r.id, "user": r.user, "reason": reason, "idle_ms": idle.Milliseconds(), "age_ms": age.Milliseconds()}
	if err != nil {
		rec["error"] = err.Error()
		rec["error_class"] = errorClassOf(err)
	}
	t.record(sb, EventSessionReclaimed, rec)
}

// dropOldTombstonesLocked forgets the oldest tombstones beyond the bound;
// t.mu is held.
func (t *sessionTable) dropOldTombstonesLocked() {
	limit := maxTombstonesPer * t.limits.MaxSessions
	var tombs []sessionKey
	for k, r := range t.recs {
		if r.state == SessionReclaimed {
			tombs = append(tombs, k)
		}
	}
	if len(tombs) <= limit {
		return
	}
	sort.Slice(tombs, func(i, j int) bool { return t.recs[tombs[i]].reclaimedAt.Before(t.recs[tombs[j]].reclaimedAt) })
	for _, k := range tombs[:len(tombs)-limit] {
		delete(t.recs, k)
	}
}

// refused reports an Open refused at a cap.
func (t *sessionTable) refused(sb *Sandbox, user string, lim *SessionLimitError) {
	t.h.metrics.refused.WithLabelValues(sb.Name(), lim.Limit).Inc()
	t.h.opts.logger.Info("session refused", "sandbox", sb.Name(), "user", user, "limit", lim.Limit, "max", lim.Max, "open", lim.Open)
	t.record(sb, EventSessionRefused, map[string]any{"user": user, "limit": lim.Limit, "max": lim.Max, "open": lim.Open})
}

// record writes a lifecycle record to the audit log, when there is one.
func (t *sessionTable) record(sb *Sandbox, typ string, payload map[string]any) {
	if a := t.h.audit; a != nil {
		if err := a.Record(Event{Type: typ, Sandbox: sb.Name(), Payload: payload}); err != nil {
			t.h.opts.logger.Error("audit log: cannot record a session event", "sandbox", sb.Name(), "event", typ, "error", err)
		}
	}
}

// sessionCall is one call on a session: it keeps the session's record
// busy (never idle) while it runs, and says whether the call had to open
// the session again.
type sessionCall struct {
	t   *sessionTable
	rec *sessionRecord // nil: no session, or one the host does not track
	// reopened: the call ran in a new backend session (StateLost).
	reopened bool
}

// beginSession starts a call on session id of s ("" for none).
func (s *Sandbox) beginSession(id string) *sessionCall {
	t := s.host.sessions
	c := &sessionCall{t: t}
	if id == "" {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.recs[sessionKey{s.Name(), id}]; r != nil {
		r.inFlight++
		r.lastUsed = time.Now()
		c.rec = r
	}
	return c
}

// end ends the call: the session is idle from now, unless another call
// is in flight.
func (c *sessionCall) end() {
	if c.rec == nil {
		return
	}
	t, r := c.t, c.rec
	t.mu.Lock()
	r.inFlight--
	r.lastUsed = time.Now()
	over := r.inFlight == 0 && r.state == SessionOpen && time.Since(r.opened) >= r.sb.lifecycle.MaxLifetime
	t.mu.Unlock()
	if over {
		t.wake() // its lifetime ended during the call
	}
}

// sessionDo runs fn on the plugin for call c. For a session the host
// opened, it first opens the session again when its backend session is
// gone (a relaunched plugin, a reclaimed session), and when the plugin
// answers that it does not know the session, it opens it again and runs
// fn once more.
func (s *Sandbox) sessionDo(ctx context.Context, c *sessionCall, op string, fn func(shared.Sandbox) error) error {
	if c.rec == nil {
		return s.inst.do(ctx, op, fn)
	}
	r := c.rec
	return s.inst.doOn(ctx, op, func(l *launched) error {
		epoch, err := s.ensureOpen(ctx, c, l)
		if err != nil {
			return err
		}
		err = fn(l.impl)
		if errors.Is(err, shared.ErrSessionPaused) {
			// Paused while the call was on its way: resume it, once, and
			// send the call again (nothing of it ran).
			if rerr := s.resumePaused(ctx, c, l); rerr != nil {
				return rerr
			}
			return fn(l.impl)
		}
		if err == nil || !errors.Is(err, shared.ErrNotFound) || !s.sessionUnknown(ctx, l, r.id, err) {
			return err
		}
		retry, rerr := s.reopenIfEpoch(ctx, c, l, epoch)
		switch {
		case rerr != nil:
			return rerr // it names the session and why it could not be opened again
		case !retry:
			return err
		}
		return fn(l.impl)
	})
}

// reopenCauseLocked says why r's backend session must be opened again on l
// ("" when it need not); t.mu is held.
func reopenCauseLocked(r *sessionRecord, l *launched) string {
	switch {
	case r.state == SessionPaused:
		return ReopenPaused
	case r.state == SessionReclaimed || r.state == SessionClosing:
		return ReopenReclaimed
	case r.state == SessionOpen && r.gen != l.gen:
		return ReopenRelaunch
	}
	return ""
}

// ensureOpen opens c's session again on l when its backend session is
// gone, and returns the record's epoch the call runs under.
func (s *Sandbox) ensureOpen(ctx context.Context, c *sessionCall, l *launched) (int, error) {
	t, r := c.t, c.rec
	t.mu.Lock()
	cause, epoch := reopenCauseLocked(r, l), r.epoch
	t.mu.Unlock()
	if cause == "" {
		return epoch, nil
	}
	r.op.Lock()
	defer r.op.Unlock()
	t.mu.Lock()
	cause, epoch = reopenCauseLocked(r, l), r.epoch
	t.mu.Unlock()
	if cause == "" {
		return epoch, nil // another call reopened it
	}
	if err := s.reopenLocked(ctx, c, l, cause); err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return r.epoch, nil
}

// reopenIfEpoch opens c's session again on l after the plugin said it
// does not know it (unless another call did since epoch: then it is open
// again already) and reports whether the call should be sent once more: not
// for a session closed explicitly meanwhile.
func (s *Sandbox) reopenIfEpoch(ctx context.Context, c *sessionCall, l *launched, epoch int) (bool, error) {
	t, r := c.t, c.rec
	r.op.Lock()
	defer r.op.Unlock()
	t.mu.Lock()
	cause := reopenCauseLocked(r, l)
	if cause == "" && r.state == SessionOpen && r.epoch == epoch {
		cause = ReopenLost
	}
	gone := r.state == sessionGone
	t.mu.Unlock()
	if gone {
		return false, nil
	}
	c.reopened = true // by this call or by another since: a new backend session either way
	if cause == "" {
		return true, nil
	}
	if err := s.reopenLocked(ctx, c, l, cause); err != nil {
		return false, err
	}
	return true, nil
}

// reopenLocked opens c's session on l with its id and user; r.op is
// held. A reclaimed session needs a place under the caps again.
func (s *Sandbox) reopenLocked(ctx context.Context, c *sessionCall, l *launched, cause string) error {
	t, r := c.t, c.rec
	if cause == ReopenPaused {
		resp, err := s.resumeOn(ctx, l, r, ReopenPaused)
		if err != nil {
			return err
		}
		c.reopened = c.reopened || resp.StateLost
		return nil
	}
	if cause == ReopenReclaimed {
		release, err := t.reserve(ctx, s, r.user)
		if err != nil {
			return fmt.Errorf("sandbox %q: session %q was closed after %s and cannot be opened again now: %w",
				s.Name(), r.id, reasonText(r), err)
		}
		defer release()
	}
	if _, err := l.impl.Open(ctx, shared.OpenRequest{SessionID: r.id, UserID: r.user}); err != nil {
		return fmt.Errorf("sandbox %q: open session %q again (%s): %w", s.Name(), r.id, cause, err)
	}
	now := time.Now()
	t.mu.Lock()
	if r.state != sessionGone {
		r.state = SessionOpen
	}
	r.gen, r.opened, r.lastUsed, r.reason, r.reclaimedAt = l.gen, now, now, "", time.Time{}
	r.epoch++
	r.reopens++
	t.mu.Unlock()
	c.reopened = true
	h := s.host
	h.metrics.reopened.WithLabelValues(s.Name(), cause).Inc()
	h.opts.logger.Info("session opened again; its state is lost", "sandbox", s.Name(), "session", r.id, "user", r.user, "cause", cause)
	t.record(s, EventSessionReopened, map[string]any{"session": r.id, "user": r.user, "cause": cause})
	return nil
}

// reasonText says why r was reclaimed, for a message.
func reasonText(r *sessionRecord) string {
	t := r.sb.host.sessions
	t.mu.Lock()
	reason := r.reason
	t.mu.Unlock()
	switch reason {
	case ReclaimIdle:
		return "idle_timeout"
	case ReclaimLifetime:
		return "max_lifetime"
	case ReclaimCapacity:
		return "making room at a session cap"
	}
	return "a reclaim"
}

// sessionUnknown reports whether err, an ErrNotFound from a call on
// session id, says that the backend does not know the session, rather
// than a thing in it (a workspace file, a tool). A backend that says so
// with shared.ErrSessionNotFound is believed; for a plain ErrNotFound the
// plugin is asked about the session itself with a call that can only miss
// the session: a listing of the workspace root, a token, or an empty
// execution.
func (s *Sandbox) sessionUnknown(ctx context.Context, l *launched, id string, err error) bool {
	if errors.Is(err, shared.ErrSessionNotFound) {
		return true
	}
	if !errors.Is(err, shared.ErrNotFound) {
		return false
	}
	s.inst.mu.Lock()
	info := s.inst.info
	s.inst.mu.Unlock()
	if fs, ok := l.impl.(shared.FileStore); ok && info.Has(shared.CapFiles) {
		_, perr := fs.ListFiles(ctx, shared.ListFilesRequest{SessionID: id})
		return errors.Is(perr, shared.ErrNotFound)
	}
	if st, ok := l.impl.(shared.SessionTools); ok && info.Has(shared.CapToolLibrary) {
		_, perr := st.MintToken(ctx, shared.MintTokenRequest{SessionID: id, Scope: shared.ScopeAgent})
		if !errors.Is(perr, shared.ErrNotSupported) {
			return errors.Is(perr, shared.ErrNotFound)
		}
	}
	_, perr := l.impl.Execute(ctx, shared.ExecuteRequest{SessionID: id, Code: "return None", Args: []byte("{}"), Timeout: 10 * time.Second})
	return errors.Is(perr, shared.ErrNotFound)
}

// openSession is Sandbox.Open: a place under the caps, the plugin's Open,
// and the record.
func (s *Sandbox) openSession(ctx context.Context, req shared.OpenRequest) (shared.OpenResponse, error) {
	t := s.host.sessions
	info, err := s.inst.infoOf(ctx)
	if err != nil {
		return shared.OpenResponse{}, err
	}
	if !info.Has(shared.CapSessions) {
		// No sessions here: the plugin says so (ErrNotSupported), and no
		// cap of other sandboxes' sessions is named instead.
		var resp shared.OpenResponse
		err := s.inst.do(ctx, "Open", func(p shared.Sandbox) error {
			var err error
			resp, err = p.Open(ctx, req)
			return err
		})
		return resp, err
	}
	if req.SessionID != "" {
		// Opening the id of a tombstone again: a new session under it.
		if r := t.lookup(s, req.SessionID); r != nil {
			r.op.Lock()
			t.mu.Lock()
			tomb := r.state == SessionReclaimed
			t.mu.Unlock()
			if tomb {
				t.forget(r)
			}
			r.op.Unlock()
		}
	}
	release, err := t.reserve(ctx, s, req.UserID)
	if err != nil {
		return shared.OpenResponse{}, fmt.Errorf("sandbox %q: %w", s.Name(), err)
	}
	defer release()
	var resp shared.OpenResponse
	var gen int
	err = s.inst.doOn(ctx, "Open", func(l *launched) error {
		var err error
		resp, err = l.impl.Open(ctx, req)
		gen = l.gen
		return err
	})
	if err != nil {
		return resp, err
	}
	t.add(s, resp.SessionID, req.UserID, gen)
	return resp, nil
}

// closeSession is Sandbox.CloseSession: the plugin's Close of a session
// the backend holds, and the host forgets it. Closing a tombstone only
// forgets it; a backend session lost with an earlier plugin process, or
// one the plugin no longer knows, is closed already.
func (s *Sandbox) closeSession(ctx context.Context, id string) error {
	t := s.host.sessions
	r := t.lookup(s, id)
	closeIt := func() error {
		return s.inst.do(ctx, "Close", func(p shared.Sandbox) error {
			_, err := p.Close(ctx, shared.CloseRequest{SessionID: id})
			return err
		})
	}
	if r == nil {
		return closeIt()
	}
	r.op.Lock()
	defer r.op.Unlock()
	t.mu.Lock()
	state, gen := r.state, r.gen
	t.mu.Unlock()
	if state == SessionPaused {
		// Its saved state is the plugin's to remove (any process of it).
		if err := closeIt(); err != nil && !errors.Is(err, shared.ErrNotFound) {
			return err
		}
		t.forget(r)
		return nil
	}
	if state != SessionOpen {
		t.forget(r)
		return nil
	}
	if live, ok := s.inst.liveGen(); !ok || live != gen {
		t.forget(r) // its plugin process is gone, and the session with it
		return nil
	}
	if err := closeIt(); err != nil && !errors.Is(err, shared.ErrNotFound) {
		return err
	}
	t.forget(r)
	return nil
}

// Sessions lists the sessions of every sandbox the host tracks (open and
// reclaimed), by sandbox and opening time.
func (h *Host) Sessions() []SessionInfo { return h.sessions.infos("") }

// SessionLimits returns the host-wide session limits in force (the
// policy's sessions block).
func (h *Host) SessionLimits() SessionLimits { return h.sessions.limits }

// SessionLimits returns the host-wide session limits the sandbox's
// sessions count against (Host.SessionLimits).
func (s *Sandbox) SessionLimits() SessionLimits { return s.host.sessions.limits }

// Sessions lists the sandbox's sessions the host tracks.
func (s *Sandbox) Sessions() []SessionInfo { return s.host.sessions.infos(s.Name()) }

// Session describes session id of the sandbox; false when the host does
// not track it (never opened through Open, closed, or a tombstone that
// expired).
func (s *Sandbox) Session(id string) (SessionInfo, bool) {
	t := s.host.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.recs[sessionKey{s.Name(), id}]
	if r == nil {
		return SessionInfo{}, false
	}
	return r.infoLocked(time.Now()), true
}

// Lifecycle returns the sandbox's session lifecycle (idle_timeout,
// max_lifetime).
func (s *Sandbox) Lifecycle() SessionLifecycle { return s.lifecycle }
