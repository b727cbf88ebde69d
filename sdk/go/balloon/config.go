// What the application gives the agent: its pool's facts, the Pool it resizes and reports, and
// the Config that NewAgent checks against the protocol's rules for a hello.

package balloon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultSocketPath is where memtide listens unless configured otherwise.
const DefaultSocketPath = "/run/memtide/balloon.sock"

// SocketEnv names the environment variable that overrides DefaultSocketPath.
const SocketEnv = "MEMTIDE_BALLOON_SOCKET"

// Kind says what sort of pool the application has.
type Kind string

// The kinds of pool of protocol version 1.
const (
	KindBufferPool Kind = "buffer_pool" // a database's buffer pool
	KindHeap       Kind = "heap"        // a language runtime's heap
	KindCache      Kind = "cache"       // an in-memory cache
	KindOther      Kind = "other"
)

func (k Kind) valid() bool {
	switch k {
	case KindBufferPool, KindHeap, KindCache, KindOther:
		return true
	}
	return false
}

// Pool is the application's side of the agent. The agent calls Shrink and Grow one at a time,
// from its own goroutine, with a target that is a multiple of the granule within [MinBytes,
// MaxBytes]; Stats may be called while one of them runs, so it must be safe for concurrent use
// and quick.
type Pool interface {
	// Shrink brings the pool down to `to` bytes and gives the memory back to the OS (freed, not
	// just unused). It returns nil when the pool is at `to`, or an error saying why not: the
	// error's text is the reason memtide is given. ctx is cancelled when memtide asks for
	// another size or the session ends, and its deadline is the target's: stop early then,
	// returning a *ResizeError with the size reached.
	Shrink(ctx context.Context, to uint64) error
	// Grow brings the pool up to `to` bytes; otherwise as Shrink.
	Grow(ctx context.Context, to uint64) error
	// Stats reports the pool's statistics now.
	Stats() Stats
}

// Stats are a pool's statistics. The agent sends them with the pool's size, which it tracks.
type Stats struct {
	UsedBytes  uint64 // the part of the pool holding data
	Hits       uint64 // lookups served from the pool, since the application started
	Misses     uint64 // lookups the pool could not serve, since the application started
	Evictions  uint64 // entries evicted, since the application started
	DirtyBytes uint64 // pool memory not yet written back
}

// ResizeError is the error a Shrink or Grow returns when it stopped with the pool at a size
// other than the one it had: the agent reports PoolBytes as the pool's size from then on. Any
// other error means the pool kept its size.
type ResizeError struct {
	PoolBytes uint64
	Err       error
}

func (e *ResizeError) Error() string {
	return fmt.Sprintf("%v (pool left at %d bytes)", e.Err, e.PoolBytes)
}

func (e *ResizeError) Unwrap() error { return e.Err }

// Config is what NewAgent needs: the pool's facts for the hello, the Pool, and where and how
// to connect. Sizes are in bytes.
type Config struct {
	App          string // what the application is: 1 to 128 bytes, no control characters
	Kind         Kind
	PoolBytes    uint64 // the pool's size now
	MinBytes     uint64 // the smallest size the application accepts
	MaxBytes     uint64 // the largest size it can grow to
	GranuleBytes uint64 // the unit the pool moves in (at least 1); targets are multiples of it
	Pool         Pool

	// SocketPath is memtide's socket. Empty means $MEMTIDE_BALLOON_SOCKET when set, else
	// DefaultSocketPath.
	SocketPath string
	// Logger gets the agent's connections, targets and errors. Nil means slog.Default().
	Logger *slog.Logger
	// OnRegistered, if set, is called with the tenant's name after each welcome.
	OnRegistered func(tenant string)
	// OnDisconnected, if set, is called with the reason each session ended while the agent
	// runs: a *ProtocolError (errors.Is with a Code tells which), ErrBye, ErrNoWelcome, or a
	// network error. The agent then reconnects after a back-off.
	OnDisconnected func(err error)
	// MinBackoff and MaxBackoff bound the wait between connection attempts, which doubles
	// from MinBackoff after each failure up to MaxBackoff, with jitter. Zero means 100 ms and
	// 30 s.
	MinBackoff, MaxBackoff time.Duration
}

const (
	defaultMinBackoff = 100 * time.Millisecond
	defaultMaxBackoff = 30 * time.Second
	maxAppBytes       = 128
)

// check returns the first rule of a hello that the config breaks, or nil. The back-off's
// defaults are filled in before.
func (c *Config) check() error {
	switch {
	case c.App == "" || len(c.App) > maxAppBytes:
		return fmt.Errorf("app = %q is %d bytes, not 1 to %d", c.App, len(c.App), maxAppBytes)
	case !utf8.ValidString(c.App) || hasControl(c.App):
		return fmt.Errorf("app = %q is not UTF-8 without control characters", c.App)
	case !c.Kind.valid():
		return fmt.Errorf("kind = %q is not one of %s, %s, %s, %s", c.Kind, KindBufferPool, KindHeap, KindCache, KindOther)
	case c.MaxBytes > MaxInteger:
		return fmt.Errorf("max_bytes = %d is over 2^53-1", c.MaxBytes)
	case c.MinBytes > c.MaxBytes:
		return fmt.Errorf("min_bytes = %d is over max_bytes = %d", c.MinBytes, c.MaxBytes)
	case c.PoolBytes < c.MinBytes || c.PoolBytes > c.MaxBytes:
		return fmt.Errorf("pool_bytes = %d is outside [min_bytes, max_bytes] = [%d, %d]", c.PoolBytes, c.MinBytes, c.MaxBytes)
	case c.GranuleBytes == 0:
		return fmt.Errorf("granule_bytes = 0: it must be at least 1")
	case c.MaxBytes > 0 && c.GranuleBytes > c.MaxBytes:
		return fmt.Errorf("granule_bytes = %d is over max_bytes = %d", c.GranuleBytes, c.MaxBytes)
	case c.Pool == nil:
		return fmt.Errorf("no Pool")
	case c.MinBackoff <= 0 || c.MinBackoff > c.MaxBackoff:
		return fmt.Errorf("back-off from %v to %v is not a range of positive durations", c.MinBackoff, c.MaxBackoff)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// socketPath is where the agent connects: the config's path, $MEMTIDE_BALLOON_SOCKET, or the
// default.
func (c *Config) socketPath() string {
	if c.SocketPath != "" {
		return c.SocketPath
	}
	if p := os.Getenv(SocketEnv); p != "" {
		return p
	}
	return DefaultSocketPath
}
