//go:build linux

// The sample pool's memory really comes and goes (checked with VmRSS), it obeys memtide's
// targets through the agent, and the benchmarks of shrinking 2 GiB to nothing and growing it
// back, in-process and through a socket.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	balloon "github.com/memtide/memtide/sdk/go/balloon"
)

func resident(tb testing.TB) uint64 {
	tb.Helper()
	rss, err := residentBytes()
	if err != nil {
		tb.Fatal(err)
	}
	return rss
}

func newTestPool(tb testing.TB, granule uint64) *reportingPool {
	tb.Helper()
	pool, err := newMmapPool(granule)
	if err != nil {
		tb.Fatal(err)
	}
	return &reportingPool{mmapPool: pool, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestGrowMakesTheMemoryResidentAndShrinkGivesItBackToTheOS(t *testing.T) {
	for _, granule := range []uint64{1 << 20, 16 << 20} {
		pool := newTestPool(t, granule)
		ctx := context.Background()
		before := resident(t)
		if err := pool.Grow(ctx, 64<<20); err != nil {
			t.Fatal(err)
		}
		grown := resident(t)
		if grown < before+60<<20 {
			t.Errorf("granule %d MiB: growing to 64 MiB raised VmRSS from %d to %d MiB", granule>>20, before>>20, grown>>20)
		}
		if err := pool.Shrink(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if after := resident(t); after > grown-60<<20 {
			t.Errorf("granule %d MiB: shrinking 64 MiB to 0 left VmRSS at %d MiB from %d", granule>>20, after>>20, grown>>20)
		}
		if st := pool.Stats(); st.UsedBytes != 0 || st.Evictions != 64<<20/granule {
			t.Errorf("granule %d MiB: stats after the shrink %+v, want nothing used and every granule evicted", granule>>20, st)
		}
	}
}

func TestAGranuleOfWholeHugePagesAsksForHugePages(t *testing.T) {
	huge := hugePageBytes()
	for granule, want := range map[uint64]bool{huge: true, 8 * huge: true, huge / 2: false, huge + 4096: false} {
		pool, err := newMmapPool(granule)
		if err != nil {
			t.Fatal(err)
		}
		if pool.huge != want {
			t.Errorf("a granule of %d bytes asks for huge pages: %v, want %v", granule, pool.huge, want)
		}
	}
}

func TestAResizeWhoseContextIsDoneStopsWithTheSizeReached(t *testing.T) {
	pool := newTestPool(t, 1<<20)
	if err := pool.Grow(context.Background(), 4<<20); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		resize func(context.Context, uint64) error
		to     uint64
	}{{"grow", pool.Grow, 8 << 20}, {"shrink", pool.Shrink, 0}} {
		var partial *balloon.ResizeError
		err := tc.resize(ctx, tc.to)
		if !errors.As(err, &partial) || partial.PoolBytes != 4<<20 || !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context returned %v, want a ResizeError at 4 MiB", tc.name, err)
		}
	}
}

func TestNewMmapPoolRefusesAGranuleOfPartPages(t *testing.T) {
	for _, g := range []uint64{0, 1000, uint64(os.Getpagesize()) + 1} {
		if _, err := newMmapPool(g); err == nil {
			t.Errorf("a granule of %d bytes was accepted", g)
		}
	}
}

func TestSizesAreBytesWithAnOptionalBinaryUnit(t *testing.T) {
	for text, want := range map[string]uint64{"4096": 4096, "512M": 512 << 20, "2GiB": 2 << 30, "1k": 1024, "3T": 3 << 40, "7B": 7} {
		var s size
		if err := s.Set(text); err != nil || uint64(s) != want {
			t.Errorf("%q read as %d, %v; want %d", text, s, err, want)
		}
	}
	for _, text := range []string{"", "G", "1.5G", "-1", "12X", "99999999999T"} {
		var s size
		if err := s.Set(text); err == nil {
			t.Errorf("%q was read as %d", text, s)
		}
	}
}

func TestTheSamplePoolObeysTargetsThroughTheAgent(t *testing.T) {
	pool := newTestPool(t, 16<<20)
	if err := pool.Grow(context.Background(), 64<<20); err != nil {
		t.Fatal(err)
	}
	m := startTinyMemtide(t, pool, 64<<20)
	before := resident(t)
	m.resize(t, 0)
	if after := resident(t); after > before-60<<20 {
		t.Errorf("a target of 0 left VmRSS at %d MiB from %d", after>>20, before>>20)
	}
	m.resize(t, 64<<20)
	if st := pool.Stats(); st.UsedBytes != 64<<20 {
		t.Errorf("the pool holds %d bytes after a target of 64 MiB", st.UsedBytes)
	}
}

const benchBytes = 2 << 30

func BenchmarkShrinkAndGrow2GiBInProcess(b *testing.B) {
	for _, granule := range []uint64{1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("granule=%dMiB", granule>>20), func(b *testing.B) {
			pool := newTestPool(b, granule)
			ctx := context.Background()
			if err := pool.Grow(ctx, benchBytes); err != nil {
				b.Fatal(err)
			}
			defer pool.Shrink(ctx, 0)
			var shrink, grow time.Duration
			var emptyRSS uint64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if err := pool.Shrink(ctx, 0); err != nil {
					b.Fatal(err)
				}
				shrink += time.Since(start)
				emptyRSS = resident(b)
				start = time.Now()
				if err := pool.Grow(ctx, benchBytes); err != nil {
					b.Fatal(err)
				}
				grow += time.Since(start)
			}
			b.ReportMetric(shrink.Seconds()/float64(b.N), "shrink-s")
			b.ReportMetric(grow.Seconds()/float64(b.N), "grow-s")
			b.ReportMetric(float64(emptyRSS>>20), "empty-rss-MiB")
			b.ReportMetric(float64(resident(b)>>20), "full-rss-MiB")
		})
	}
}

func BenchmarkShrinkAndGrow2GiBThroughTheAgent(b *testing.B) {
	pool := newTestPool(b, 16<<20)
	ctx := context.Background()
	if err := pool.Grow(ctx, benchBytes); err != nil {
		b.Fatal(err)
	}
	defer pool.Shrink(ctx, 0)
	m := startTinyMemtide(b, pool, benchBytes)
	var shrink, grow time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		shrink += m.resize(b, 0)
		grow += m.resize(b, benchBytes)
	}
	b.ReportMetric(shrink.Seconds()/float64(b.N), "shrink-s")
	b.ReportMetric(grow.Seconds()/float64(b.N), "grow-s")
}

// tinyMemtide is just enough of memtide to register one agent and send it targets.
type tinyMemtide struct {
	conn net.Conn
	r    *bufio.Reader
	seq  int
}

// startTinyMemtide runs an agent for pool, of poolBytes now, and registers it.
func startTinyMemtide(tb testing.TB, pool balloon.Pool, poolBytes uint64) *tinyMemtide {
	tb.Helper()
	dir, err := os.MkdirTemp("", "balloon-pool-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "balloon.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	agent, err := balloon.NewAgent(balloon.Config{
		App: "balloon-pool-test", Kind: balloon.KindBufferPool,
		PoolBytes: poolBytes, MaxBytes: benchBytes, GranuleBytes: 16 << 20,
		Pool: pool, SocketPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	conn, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	m := &tinyMemtide{conn: conn, r: bufio.NewReader(conn)}
	m.next(tb, "hello")
	m.send(tb, `{"type":"welcome","version":1,"tenant":"bench","stats_interval_ms":60000,"dead_after_ms":180000}`)
	return m
}

func (m *tinyMemtide) send(tb testing.TB, line string) {
	tb.Helper()
	if _, err := m.conn.Write([]byte(line + "\n")); err != nil {
		tb.Fatal(err)
	}
}

// next reads lines until one of the given type.
func (m *tinyMemtide) next(tb testing.TB, typ string) map[string]any {
	tb.Helper()
	for {
		if err := m.conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			tb.Fatal(err)
		}
		line, err := m.r.ReadBytes('\n')
		if err != nil {
			tb.Fatalf("waiting for %s: %v", typ, err)
		}
		var msg map[string]any
		if err := json.Unmarshal(line, &msg); err != nil {
			tb.Fatalf("%q: %v", line, err)
		}
		if msg["type"] == typ {
			return msg
		}
	}
}

// resize sends a target and waits for its done, returning how long that took.
func (m *tinyMemtide) resize(tb testing.TB, to uint64) time.Duration {
	tb.Helper()
	m.seq++
	start := time.Now()
	m.send(tb, fmt.Sprintf(`{"type":"target","seq":%d,"pool_bytes":%d,"deadline_ms":60000}`, m.seq, to))
	for {
		msg := m.next(tb, "progress")
		if msg["status"] == "working" {
			continue
		}
		took := time.Since(start)
		if msg["seq"] != float64(m.seq) || msg["status"] != "done" {
			tb.Fatalf("target %d of %d bytes answered %v", m.seq, to, msg)
		}
		return took
	}
}
