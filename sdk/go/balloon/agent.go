// The Agent: NewAgent checks a Config, and Run keeps a session with memtide open on the
// caller's goroutine, reconnecting with exponential back-off until its context is done.

package balloon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// Agent connects an application's pool to memtide. Make one with NewAgent and call Run.
type Agent struct {
	cfg  Config
	path string
	log  *slog.Logger
	pid  int

	running atomic.Bool
	// poolBytes is the pool's size as the agent knows it: the registered size, then what
	// each Shrink or Grow left. Only Run's goroutine uses it.
	poolBytes uint64

	// progressEvery is how often a running Shrink or Grow is reported as working.
	progressEvery time.Duration
	// welcomeTimeout is how long the agent waits for a welcome after its hello.
	welcomeTimeout time.Duration
}

const (
	defaultProgressEvery  = time.Second
	defaultWelcomeTimeout = 10 * time.Second
	dialTimeout           = 5 * time.Second
	writeTimeout          = 5 * time.Second
)

// NewAgent checks cfg against the protocol's rules for a hello and returns an agent for it.
// The socket path is resolved now (see Config.SocketPath). Every error wraps ErrInvalidConfig.
func NewAgent(cfg Config) (*Agent, error) {
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = defaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(defaultMaxBackoff, cfg.MinBackoff)
	}
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	a := &Agent{
		cfg:            cfg,
		path:           cfg.socketPath(),
		pid:            os.Getpid(),
		poolBytes:      cfg.PoolBytes,
		progressEvery:  defaultProgressEvery,
		welcomeTimeout: defaultWelcomeTimeout,
	}
	a.log = logger.With("socket", a.path, "app", cfg.App)
	return a, nil
}

// Run connects to memtide, registers the pool and serves memtide's targets, reconnecting
// after a back-off whenever the connection drops, memtide says bye or sends a fatal error. It
// returns nil once ctx is done, after saying bye to memtide and waiting for a running Shrink or
// Grow (whose context is cancelled) to return. Run it on its own goroutine; it returns
// ErrRunning if the agent is already running.
func (a *Agent) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer a.running.Store(false)
	delay := a.cfg.MinBackoff
	for {
		registered, err := a.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			delay = a.cfg.MinBackoff
		}
		wait := jitter(delay)
		a.log.Warn("balloon: no session with memtide; reconnecting", "err", err, "retry_in", wait)
		if a.cfg.OnDisconnected != nil {
			a.cfg.OnDisconnected(err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		delay = min(2*delay, a.cfg.MaxBackoff)
	}
}

// session runs one connection to its end, saying whether memtide welcomed the agent.
func (a *Agent) session(ctx context.Context) (registered bool, err error) {
	dialer := net.Dialer{Timeout: dialTimeout}
	conn, err := dialer.DialContext(ctx, "unix", a.path)
	if err != nil {
		return false, fmt.Errorf("connecting to memtide: %w", err)
	}
	s := newSession(ctx, a, conn)
	err = s.run()
	s.close()
	return s.registered, err
}

// hello is the registration of the pool as it is now.
func (a *Agent) hello() hello {
	return hello{
		Version:      Version,
		App:          a.cfg.App,
		Kind:         a.cfg.Kind,
		PID:          a.pid,
		PoolBytes:    a.poolBytes,
		MinBytes:     a.cfg.MinBytes,
		MaxBytes:     a.cfg.MaxBytes,
		GranuleBytes: a.cfg.GranuleBytes,
	}
}

// checkTarget tells whether the pool may be resized to size: a multiple of the granule within
// [MinBytes, MaxBytes].
func (a *Agent) checkTarget(size uint64) *ProtocolError {
	if size%a.cfg.GranuleBytes != 0 {
		return protocolErrorf(CodeBadField, "target.pool_bytes = %d is not a multiple of granule_bytes = %d", size, a.cfg.GranuleBytes)
	}
	if size < a.cfg.MinBytes || size > a.cfg.MaxBytes {
		return protocolErrorf(CodeBadField, "target.pool_bytes = %d is outside [min_bytes, max_bytes] = [%d, %d]", size, a.cfg.MinBytes, a.cfg.MaxBytes)
	}
	return nil
}

// resized records what a Shrink or Grow towards `to` left the pool at, given its error.
func (a *Agent) resized(to uint64, err error) {
	var partial *ResizeError
	switch {
	case err == nil:
		a.poolBytes = to
	case errors.As(err, &partial):
		if partial.PoolBytes > a.cfg.MaxBytes {
			a.log.Warn("balloon: the pool reports a size over its max_bytes; reporting max_bytes", "pool_bytes", partial.PoolBytes, "max_bytes", a.cfg.MaxBytes)
		}
		a.poolBytes = min(partial.PoolBytes, a.cfg.MaxBytes)
	}
}

// jitter picks a wait in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + time.Duration(rand.Int63n(int64(d-half)+1))
}
