//go:build linux

// Command balloon-pool is the Go SDK's sample application: a pool of real memory, mapped and
// unmapped in granules, that registers with memtide and obeys its targets, logging its size
// and the process's resident memory after each one.
//
//	balloon-pool -pool 2G -min 256M -max 4G -granule 16M [-socket PATH] [-app NAME] [-kind KIND]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	balloon "github.com/memtide/memtide/sdk/go/balloon"
)

func main() {
	opts, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2) // the flag package has said why
	}
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "balloon-pool:", err)
		os.Exit(1)
	}
}

// options are the command line's.
type options struct {
	pool, min, max, granule size
	app, kind, socket       string
}

func parseFlags(args []string) (options, error) {
	o := options{pool: 1 << 30, granule: 16 << 20}
	flags := flag.NewFlagSet("balloon-pool", flag.ContinueOnError)
	flags.Var(&o.pool, "pool", "the pool's size at start: bytes, or a number with K, M, G or T")
	flags.Var(&o.min, "min", "the smallest size the pool accepts")
	flags.Var(&o.max, "max", "the largest size it grows to (default: the size at start)")
	flags.Var(&o.granule, "granule", "the unit it moves in: a multiple of the page size, and of the huge page size for huge pages")
	flags.StringVar(&o.app, "app", "balloon-pool", "the application's name for memtide")
	flags.StringVar(&o.kind, "kind", string(balloon.KindBufferPool), "buffer_pool, heap, cache or other")
	flags.StringVar(&o.socket, "socket", "", "memtide's socket (default: $"+balloon.SocketEnv+", else "+balloon.DefaultSocketPath+")")
	if err := flags.Parse(args); err != nil {
		return o, err
	}
	if o.max == 0 {
		o.max = o.pool
	}
	return o, nil
}

func run(o options) error {
	pool, err := newMmapPool(uint64(o.granule))
	if err != nil {
		return err
	}
	for _, s := range []struct {
		name string
		v    size
	}{{"pool", o.pool}, {"min", o.min}, {"max", o.max}} {
		if s.v%o.granule != 0 {
			return fmt.Errorf("-%s = %d bytes is not a multiple of -granule = %d", s.name, s.v, o.granule)
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	reporting := &reportingPool{mmapPool: pool, log: logger}
	agent, err := balloon.NewAgent(balloon.Config{
		App: o.app, Kind: balloon.Kind(o.kind),
		PoolBytes: uint64(o.pool), MinBytes: uint64(o.min), MaxBytes: uint64(o.max), GranuleBytes: uint64(o.granule),
		Pool:       reporting,
		SocketPath: o.socket,
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := reporting.Grow(ctx, uint64(o.pool)); err != nil {
		return fmt.Errorf("filling the pool to %d bytes: %w", o.pool, err)
	}
	return agent.Run(ctx)
}

// reportingPool logs the pool's size, the time taken and the process's resident memory after
// each resize.
type reportingPool struct {
	*mmapPool
	log *slog.Logger
}

func (p *reportingPool) Grow(ctx context.Context, to uint64) error {
	start := time.Now()
	err := p.mmapPool.Grow(ctx, to)
	p.report("grow", to, time.Since(start), err)
	return err
}

func (p *reportingPool) Shrink(ctx context.Context, to uint64) error {
	start := time.Now()
	err := p.mmapPool.Shrink(ctx, to)
	p.report("shrink", to, time.Since(start), err)
	return err
}

func (p *reportingPool) report(how string, to uint64, took time.Duration, err error) {
	attrs := []any{"target_mib", to >> 20, "pool_mib", p.size.Load() >> 20, "took", took.Round(time.Millisecond)}
	if rss, rssErr := residentBytes(); rssErr == nil {
		attrs = append(attrs, "rss_mib", rss>>20)
	} else {
		attrs = append(attrs, "rss_err", rssErr)
	}
	if err != nil {
		p.log.Warn("pool "+how+" stopped", append(attrs, "err", err)...)
		return
	}
	p.log.Info("pool "+how, attrs...)
}
