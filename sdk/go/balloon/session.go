// One connection to memtide: hello and welcome, stats on a ticker, targets served by calling the
// Pool on a worker goroutine (a newer target cancels an older one), and the answers to lines
// that cannot be read. One goroutine owns the session and is the only writer; a reader
// goroutine decodes lines for it.

package balloon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

type session struct {
	ctx  context.Context // the agent's: done when the application stops it
	a    *Agent
	conn net.Conn

	lines      chan lineResult
	stop       chan struct{} // closed when the session ends, to release the reader
	readerDone chan struct{}

	registered bool
	stats      <-chan time.Time // stats are due; nil before the welcome
	ticker     *time.Ticker
	sent       stats  // the last stats sent, whose counters never go down
	lastSeq    uint64 // the latest target's seq

	work     *work            // the Shrink or Grow running, if any
	workDone chan error       // its result
	pending  *pendingTarget   // the target to start once the running one has returned
	progress <-chan time.Time // the running one is due a working progress; nil when none runs
}

// lineResult is one line from memtide: a message, a line that cannot be read, or the end of
// the stream.
type lineResult struct {
	msg  message
	perr *ProtocolError
	err  error
}

// work is a Shrink or Grow running on its own goroutine.
type work struct {
	seq, to  uint64
	cancel   context.CancelFunc
	progress *time.Ticker
}

// pendingTarget is a checked target waiting for the pool, with its deadline.
type pendingTarget struct {
	target
	deadline time.Time
}

func newSession(ctx context.Context, a *Agent, conn net.Conn) *session {
	return &session{
		ctx:        ctx,
		a:          a,
		conn:       conn,
		lines:      make(chan lineResult),
		stop:       make(chan struct{}),
		readerDone: make(chan struct{}),
		workDone:   make(chan error, 1),
	}
}

// run says hello and serves the connection until it ends, returning why. It says bye when the
// agent's context is done.
func (s *session) run() error {
	go s.read()
	if err := s.send(s.a.hello()); err != nil {
		return err
	}
	noWelcome := time.NewTimer(s.a.welcomeTimeout)
	defer noWelcome.Stop()
	for {
		var err error
		select {
		case <-s.ctx.Done():
			// The connection closes next whatever happens to the bye.
			_ = s.send(bye{Reason: "the application is stopping its balloon agent"})
			return s.ctx.Err()
		case <-noWelcome.C:
			if !s.registered {
				return fmt.Errorf("%w within %v of the hello", ErrNoWelcome, s.a.welcomeTimeout)
			}
		case r := <-s.lines:
			err = s.handle(r)
		case <-s.stats:
			err = s.sendStats()
		case <-s.progress:
			if s.work.seq == s.lastSeq {
				err = s.sendProgress(s.work.seq, statusWorking, "")
			}
		case resizeErr := <-s.workDone:
			err = s.finish(resizeErr)
		}
		if err != nil {
			return err
		}
	}
}

// close ends the connection, then waits for the reader and for a running Shrink or Grow, whose
// context it cancels.
func (s *session) close() {
	close(s.stop)
	s.conn.Close()
	<-s.readerDone
	if s.ticker != nil {
		s.ticker.Stop()
	}
	if s.work != nil {
		s.work.cancel()
		s.work.progress.Stop()
		s.a.resized(s.work.to, <-s.workDone)
	}
}

// read decodes lines for run until the stream ends.
func (s *session) read() {
	defer close(s.readerDone)
	lr := newLineReader(s.conn)
	for {
		var r lineResult
		line, err := lr.next()
		var perr *ProtocolError
		switch {
		case err == nil:
			r.msg, r.perr = decodeLine(line)
		case errors.As(err, &perr):
			r.perr = perr
		default:
			r.err = err
		}
		select {
		case s.lines <- r:
		case <-s.stop:
			return
		}
		if r.err != nil {
			return
		}
	}
}

// handle acts on one line from memtide; an error ends the session.
func (s *session) handle(r lineResult) error {
	switch {
	case errors.Is(r.err, io.EOF):
		return fmt.Errorf("memtide closed the connection: %w", r.err)
	case r.err != nil:
		return fmt.Errorf("reading from memtide: %w", r.err)
	case r.perr != nil:
		s.a.log.Warn("balloon: cannot read a line from memtide", "err", r.perr)
		if r.perr.Code == CodeVersion {
			r.perr.Fatal = true
			if err := s.sendError(r.perr); err != nil {
				return err
			}
			return r.perr
		}
		return s.sendError(r.perr)
	}
	switch m := r.msg.(type) {
	case welcome:
		return s.welcome(m)
	case target:
		return s.target(m)
	case bye:
		return fmt.Errorf("%w: %q", ErrBye, m.Reason)
	case errorMessage:
		perr := &ProtocolError{Code: m.Code, Message: m.Message, Fatal: m.Fatal, Remote: true}
		if m.Fatal {
			return perr
		}
		s.a.log.Warn("balloon: memtide reports an error", "err", perr)
	}
	return nil
}

func (s *session) welcome(m welcome) error {
	if s.registered {
		return s.sendError(protocolErrorf(CodeAlreadyRegistered, "a second welcome on this connection"))
	}
	s.registered = true
	interval := millis(m.StatsIntervalMS)
	// "At least every stats_interval_ms": a tenth early, so a late tick is not late.
	s.ticker = time.NewTicker(interval - interval/10)
	s.stats = s.ticker.C
	s.a.log.Info("balloon: registered with memtide", "tenant", m.Tenant, "stats_interval", interval)
	if s.a.cfg.OnRegistered != nil {
		s.a.cfg.OnRegistered(m.Tenant)
	}
	return s.sendStats()
}

// target checks a target and starts it, or queues it behind the running one, which it cancels.
func (s *session) target(t target) error {
	if !s.registered {
		return s.sendError(protocolErrorf(CodeNotRegistered, "target.seq = %d came before the welcome", t.Seq))
	}
	if t.Seq <= s.lastSeq {
		return s.sendError(protocolErrorf(CodeBadField, "target.seq = %d is not above the last target's seq = %d", t.Seq, s.lastSeq))
	}
	s.lastSeq = t.Seq
	s.pending = nil
	if s.work != nil {
		s.work.cancel()
	}
	if perr := s.a.checkTarget(t.PoolBytes); perr != nil {
		return s.sendError(perr)
	}
	s.a.log.Debug("balloon: target", "seq", t.Seq, "pool_bytes", t.PoolBytes, "deadline_ms", t.DeadlineMS)
	s.pending = &pendingTarget{target: t, deadline: time.Now().Add(millis(t.DeadlineMS))}
	if s.work != nil {
		return nil
	}
	return s.startPending()
}

// startPending calls Shrink or Grow for the pending target on a new goroutine, or answers done
// at once if the pool is at its size.
func (s *session) startPending() error {
	t := s.pending
	s.pending = nil
	if t.PoolBytes == s.a.poolBytes {
		return s.sendProgress(t.Seq, statusDone, "")
	}
	resize := s.a.cfg.Pool.Grow
	if t.PoolBytes < s.a.poolBytes {
		resize = s.a.cfg.Pool.Shrink
	}
	ctx, cancel := context.WithDeadline(s.ctx, t.deadline)
	s.work = &work{seq: t.Seq, to: t.PoolBytes, cancel: cancel, progress: time.NewTicker(s.a.progressEvery)}
	s.progress = s.work.progress.C
	go func(to uint64) { s.workDone <- resize(ctx, to) }(t.PoolBytes)
	return nil
}

// finish takes the result of the running Shrink or Grow: it answers the target unless a newer
// one came, reports the new size and starts the pending target.
func (s *session) finish(resizeErr error) error {
	w := s.work
	s.work, s.progress = nil, nil
	w.cancel()
	w.progress.Stop()
	from := s.a.poolBytes
	s.a.resized(w.to, resizeErr)
	switch {
	case w.seq != s.lastSeq:
		s.a.log.Debug("balloon: a superseded target returned", "seq", w.seq, "pool_bytes", s.a.poolBytes, "err", resizeErr)
	case resizeErr == nil:
		s.a.log.Info("balloon: pool resized", "seq", w.seq, "from", from, "to", s.a.poolBytes)
		if err := s.sendProgress(w.seq, statusDone, ""); err != nil {
			return err
		}
	default:
		s.a.log.Warn("balloon: the pool could not be resized", "seq", w.seq, "target", w.to, "pool_bytes", s.a.poolBytes, "err", resizeErr)
		if err := s.sendProgress(w.seq, statusFailed, resizeErr.Error()); err != nil {
			return err
		}
	}
	if err := s.sendStats(); err != nil {
		return err
	}
	if s.pending != nil {
		return s.startPending()
	}
	return nil
}

func (s *session) sendProgress(seq uint64, st status, reason string) error {
	return s.send(progress{Seq: seq, PoolBytes: s.a.poolBytes, Status: st, Reason: truncateUTF8(reason, maxReasonBytes)})
}

// sendStats reports the pool, keeping the figures within the protocol's rules: used and dirty
// bytes at most the pool, counters never going down within the session.
func (s *session) sendStats() error {
	s.sent = statsMessage(s.a.poolBytes, s.a.cfg.Pool.Stats(), s.sent)
	return s.send(s.sent)
}

func statsMessage(pool uint64, st Stats, last stats) stats {
	counter := func(now, before uint64) uint64 { return min(max(now, before), MaxInteger) }
	return stats{
		PoolBytes:  pool,
		UsedBytes:  min(st.UsedBytes, pool),
		Hits:       counter(st.Hits, last.Hits),
		Misses:     counter(st.Misses, last.Misses),
		Evictions:  counter(st.Evictions, last.Evictions),
		DirtyBytes: min(st.DirtyBytes, pool),
	}
}

func (s *session) sendError(perr *ProtocolError) error {
	return s.send(errorMessage{Code: perr.Code, Message: perr.Message, Fatal: perr.Fatal})
}

func (s *session) send(m message) error {
	line, err := encode(m)
	if err != nil {
		return err
	}
	if err := s.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return fmt.Errorf("writing %s to memtide: %w", m.wireType(), err)
	}
	if _, err := s.conn.Write(line); err != nil {
		return fmt.Errorf("writing %s to memtide: %w", m.wireType(), err)
	}
	return nil
}

// millis converts the protocol's milliseconds to a Duration, saturating at the largest.
func millis(ms uint64) time.Duration {
	const limit = uint64(1<<63-1) / uint64(time.Millisecond)
	return time.Duration(min(ms, limit)) * time.Millisecond
}
