// The test harness: a player of memtide's side that listens on a Unix socket in a temporary
// directory and runs the steps of docs/balloon-protocol.md "Test vectors" (expect with its skip
// rule, send, expect_closed), a Pool that complies or refuses, and an agent run for one test.

package balloon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// stepTimeout bounds each expect and expect_closed, as the vectors' "within 5 s".
const stepTimeout = 5 * time.Second

// memtide listens where the agent under test connects.
type memtide struct {
	t    *testing.T
	path string
	ln   *net.UnixListener
}

func newMemtide(t *testing.T) *memtide {
	t.Helper()
	// Not t.TempDir(): a socket's path must fit in 108 bytes, and test names are long.
	dir, err := os.MkdirTemp("", "balloon-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &memtide{t: t, path: filepath.Join(dir, "balloon.sock")}
	m.listen()
	return m
}

func (m *memtide) listen() {
	m.t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: m.path, Net: "unix"})
	if err != nil {
		m.t.Fatal(err)
	}
	m.ln = ln
	m.t.Cleanup(func() { ln.Close() })
}

// accept waits for the agent's next connection.
func (m *memtide) accept() *peer {
	m.t.Helper()
	if err := m.ln.SetDeadline(time.Now().Add(stepTimeout)); err != nil {
		m.t.Fatal(err)
	}
	conn, err := m.ln.AcceptUnix()
	if err != nil {
		m.t.Fatalf("the agent did not connect: %v", err)
	}
	m.t.Cleanup(func() { conn.Close() })
	return &peer{t: m.t, conn: conn, r: bufio.NewReader(conn)}
}

// peer is one connection from the agent, seen from memtide.
type peer struct {
	t    *testing.T
	conn *net.UnixConn
	r    *bufio.Reader
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := p.conn.Write([]byte(line + "\n")); err != nil {
		p.t.Fatalf("sending %.80s: %v", line, err)
	}
}

// readLine returns the agent's next line as a JSON object, or io.EOF when it closed.
func (p *peer) readLine() (map[string]any, error) {
	if err := p.conn.SetReadDeadline(time.Now().Add(stepTimeout)); err != nil {
		return nil, err
	}
	line, err := p.r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, fmt.Errorf("an unfinished line before the end: %q", line)
		}
		return nil, err
	}
	obj, err := decodeObject(line)
	if err != nil {
		return nil, fmt.Errorf("the agent sent %q: %w", line, err)
	}
	return obj, nil
}

// skippable tells whether a line is timed by the agent (stats, working progress) and not asked
// for by want: "expect" passes over such lines.
func skippable(line, want map[string]any) bool {
	typ := line["type"]
	timed := typ == "stats" || (typ == "progress" && line["status"] == "working")
	asked := want != nil && want["type"] == typ && (typ == "stats" || want["status"] == line["status"])
	return timed && !asked
}

// expect reads lines until one that is not skippable, which must hold every key of want.
func (p *peer) expect(want map[string]any) map[string]any {
	p.t.Helper()
	for {
		got, err := p.readLine()
		if err != nil {
			p.t.Fatalf("expecting %v: %v", want, err)
		}
		if skippable(got, want) {
			continue
		}
		for k, v := range want {
			if !reflect.DeepEqual(got[k], v) {
				p.t.Fatalf("expected %v, got %v (%s differs)", want, got, k)
			}
		}
		return got
	}
}

// expectJSON is expect with the object written as JSON.
func (p *peer) expectJSON(want string) map[string]any {
	p.t.Helper()
	obj, err := decodeObject([]byte(want))
	if err != nil {
		p.t.Fatal(err)
	}
	return p.expect(obj)
}

// expectClosed reads to the end of the stream, passing over timed lines only.
func (p *peer) expectClosed() {
	p.t.Helper()
	for {
		got, err := p.readLine()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			p.t.Fatalf("expecting the agent to close: %v", err)
		}
		if !skippable(got, nil) {
			p.t.Fatalf("expecting the agent to close, got %v", got)
		}
	}
}

// welcome answers the hello and takes the stats the agent sends at once.
func (p *peer) welcome() {
	p.t.Helper()
	p.expectJSON(`{"type":"hello"}`)
	p.send(`{"type":"welcome","version":1,"tenant":"test","stats_interval_ms":60000,"dead_after_ms":180000}`)
	p.expectJSON(`{"type":"stats"}`)
}

// decodeObject reads one JSON object with its numbers kept as written.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("not a JSON object")
	}
	return obj, nil
}

// testPool is a Pool that complies or refuses, optionally holding its first call until its
// context is done or it is released.
type testPool struct {
	mu       sync.Mutex
	size     uint64
	refuse   bool
	partial  *uint64       // a call stops with the pool at this size
	hold     chan struct{} // when set, the first call waits for its context or for a close
	started  chan uint64   // when set, gets each call's target as it starts
	calls    []string
	ctxErr   error     // the held call's context error
	deadline time.Time // the last call's context deadline
	stats    Stats
}

func (p *testPool) Shrink(ctx context.Context, to uint64) error { return p.resize(ctx, "shrink", to) }
func (p *testPool) Grow(ctx context.Context, to uint64) error   { return p.resize(ctx, "grow", to) }

func (p *testPool) resize(ctx context.Context, how string, to uint64) error {
	p.mu.Lock()
	p.calls = append(p.calls, fmt.Sprintf("%s %d", how, to))
	p.deadline, _ = ctx.Deadline()
	hold := p.hold
	p.hold = nil
	started := p.started
	p.mu.Unlock()
	if started != nil {
		started <- to
	}
	if hold != nil {
		select {
		case <-ctx.Done():
			p.mu.Lock()
			defer p.mu.Unlock()
			p.ctxErr = ctx.Err()
			p.size = (p.size + to) / 2
			return &ResizeError{PoolBytes: p.size, Err: ctx.Err()}
		case <-hold:
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.refuse:
		return errors.New("the test pool refuses")
	case p.partial != nil:
		p.size = *p.partial
		return &ResizeError{PoolBytes: p.size, Err: errors.New("pages pinned")}
	}
	p.size = to
	return nil
}

func (p *testPool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *testPool) callLog() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// testConfig is the pool of the vectors (512 MiB in [64 MiB, 1 GiB], granule 1 MiB) at m.
func testConfig(m *memtide, pool *testPool) Config {
	pool.size = 512 << 20
	return Config{
		App:          "vector-test",
		Kind:         KindBufferPool,
		PoolBytes:    512 << 20,
		MinBytes:     64 << 20,
		MaxBytes:     1 << 30,
		GranuleBytes: 1 << 20,
		Pool:         pool,
		SocketPath:   m.path,
		MinBackoff:   10 * time.Millisecond,
		MaxBackoff:   50 * time.Millisecond,
	}
}

// running is an agent run for one test.
type running struct {
	t      *testing.T
	agent  *Agent
	cancel context.CancelFunc
	done   chan error
	ended  chan error // what OnDisconnected got
}

// startAgent runs an agent for cfg until stop or the end of the test. tune may change the
// agent before it runs.
func startAgent(t *testing.T, cfg Config, tune ...func(*Agent)) *running {
	t.Helper()
	r := &running{t: t, done: make(chan error, 1), ended: make(chan error, 16)}
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.OnDisconnected = func(err error) {
		select {
		case r.ended <- err:
		default:
		}
	}
	agent, err := NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tune {
		f(agent)
	}
	r.agent = agent
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- agent.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// stop cancels the agent's context and returns what Run returned.
func (r *running) stop() error {
	r.t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for a second stop
		return err
	case <-time.After(stepTimeout):
		r.t.Fatal("Run did not return within 5 s of its context's end")
		return nil
	}
}

// disconnected waits for the reason of the next session's end.
func (r *running) disconnected() error {
	r.t.Helper()
	select {
	case err := <-r.ended:
		return err
	case <-time.After(stepTimeout):
		r.t.Fatal("no session ended within 5 s")
		return nil
	}
}

// testWriter sends the agent's log to the test's log, shown when a test fails or with -v.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimSuffix(p, []byte("\n"))))
	return len(p), nil
}
