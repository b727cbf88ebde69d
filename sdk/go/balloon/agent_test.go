// The agent's behaviour beyond the vectors: reconnecting, stopping, back-off, superseded
// targets, working progress, stats, and the typed reasons a session ends.

package balloon

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAgentSaysHelloAgainAfterTheConnectionDrops(t *testing.T) {
	m := newMemtide(t)
	r := startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	p.conn.Close()
	if err := r.disconnected(); !errors.Is(err, io.EOF) {
		t.Errorf("the session ended with %v, want memtide's close (EOF)", err)
	}
	m.accept().expectJSON(`{"type":"hello","pool_bytes":536870912}`)
}

func TestAgentReconnectsAfterMemtideSaysBye(t *testing.T) {
	m := newMemtide(t)
	r := startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"bye","reason":"memtide is stopping"}`)
	p.expectClosed()
	if err := r.disconnected(); !errors.Is(err, ErrBye) || !strings.Contains(err.Error(), "memtide is stopping") {
		t.Errorf("the session ended with %v, want ErrBye with memtide's reason", err)
	}
	m.accept().expectJSON(`{"type":"hello"}`)
}

func TestAgentHelloReportsThePoolLeftByTheLastSession(t *testing.T) {
	m := newMemtide(t)
	startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"done"}`)
	p.conn.Close()
	m.accept().expectJSON(`{"type":"hello","pool_bytes":268435456}`)
}

func TestStoppingTheAgentSaysByeAndCloses(t *testing.T) {
	m := newMemtide(t)
	r := startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	if err := r.stop(); err != nil {
		t.Errorf("Run returned %v after its context ended, want nil", err)
	}
	p.expectJSON(`{"type":"bye"}`)
	p.expectClosed()
}

func TestStoppingTheAgentCancelsARunningCallbackAndWaitsForIt(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{hold: make(chan struct{}), started: make(chan uint64, 1)}
	r := startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	<-pool.started
	r.stop()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if !errors.Is(pool.ctxErr, context.Canceled) {
		t.Errorf("the running shrink's context ended with %v when Run returned, want cancelled", pool.ctxErr)
	}
}

func TestRunningTheAgentTwiceAtOnceIsRefused(t *testing.T) {
	m := newMemtide(t)
	r := startAgent(t, testConfig(m, &testPool{}))
	m.accept().expectJSON(`{"type":"hello"}`)
	if err := r.agent.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Errorf("a second Run returned %v, want ErrRunning", err)
	}
}

func TestAgentRetriesUntilMemtideListens(t *testing.T) {
	m := newMemtide(t)
	m.ln.Close()
	os.Remove(m.path)
	r := startAgent(t, testConfig(m, &testPool{}))
	if err := r.disconnected(); err == nil || !strings.Contains(err.Error(), m.path) {
		t.Errorf("a failed connection ended with %v, want an error naming the socket", err)
	}
	m.listen()
	m.accept().expectJSON(`{"type":"hello"}`)
}

func TestBackoffDoublesFromTheMinimumUpToTheMaximum(t *testing.T) {
	m := newMemtide(t)
	cfg := testConfig(m, &testPool{})
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 80*time.Millisecond
	startAgent(t, cfg)
	// memtide closes each connection before any welcome: each is a failure.
	var at []time.Time
	for i := 0; i < 7; i++ {
		p := m.accept()
		at = append(at, time.Now())
		p.conn.Close()
	}
	// Waits are drawn in [d/2, d] for d = 20, 40, 80, 80, 80, 80 ms.
	least := []time.Duration{10, 20, 40, 40, 40, 40}
	for i, l := range least {
		if gap := at[i+1].Sub(at[i]); gap < l*time.Millisecond {
			t.Errorf("wait %d was %v, want at least %v", i+1, gap, l*time.Millisecond)
		}
	}
	// Doubling without the cap would wait at least 320 ms by the sixth.
	if gap := at[6].Sub(at[5]); gap > 300*time.Millisecond {
		t.Errorf("the sixth wait was %v: the back-off is not capped at 80 ms", gap)
	}
}

func TestJitterPicksBetweenHalfAndAllOfTheDelay(t *testing.T) {
	d := 100 * time.Millisecond
	low, high := d, time.Duration(0)
	for i := 0; i < 1000; i++ {
		j := jitter(d)
		low, high = min(low, j), max(high, j)
	}
	if low < d/2 || high > d {
		t.Errorf("jitter(%v) ranged over [%v, %v], want within [%v, %v]", d, low, high, d/2, d)
	}
	if high-low < d/4 {
		t.Errorf("jitter(%v) ranged over [%v, %v] only: it does not spread", d, low, high)
	}
}

func TestHelloCarriesThisProcessPID(t *testing.T) {
	m := newMemtide(t)
	startAgent(t, testConfig(m, &testPool{}))
	m.accept().expectJSON(`{"type":"hello","pid":` + strconv.Itoa(os.Getpid()) + `}`)
}

func TestAFatalErrorFromMemtideEndsTheSessionWithItsCode(t *testing.T) {
	m := newMemtide(t)
	r := startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.expectJSON(`{"type":"hello"}`)
	p.send(`{"type":"error","code":"identity","message":"pid 1 is in no tenant","fatal":true}`)
	p.expectClosed()
	err := r.disconnected()
	var perr *ProtocolError
	if !errors.Is(err, CodeIdentity) || !errors.As(err, &perr) || !perr.Remote || perr.Message != "pid 1 is in no tenant" {
		t.Errorf("the session ended with %v, want memtide's identity error", err)
	}
	m.accept().expectJSON(`{"type":"hello"}`)
}

func TestANonFatalErrorFromMemtideKeepsTheSession(t *testing.T) {
	m := newMemtide(t)
	startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"error","code":"unknown_seq","message":"progress.seq = 9 was never sent","fatal":false}`)
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"done"}`)
}

func TestAgentWithoutAWelcomeClosesAndTriesAgain(t *testing.T) {
	m := newMemtide(t)
	r := startAgent(t, testConfig(m, &testPool{}), func(a *Agent) { a.welcomeTimeout = 50 * time.Millisecond })
	p := m.accept()
	p.expectJSON(`{"type":"hello"}`)
	p.expectClosed()
	if err := r.disconnected(); !errors.Is(err, ErrNoWelcome) {
		t.Errorf("the session ended with %v, want ErrNoWelcome", err)
	}
	m.accept().expectJSON(`{"type":"hello"}`)
}

func TestATargetBeforeTheWelcomeIsNotRegistered(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.expectJSON(`{"type":"hello"}`)
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"error","code":"not_registered","fatal":false}`)
	if calls := pool.callLog(); len(calls) != 0 {
		t.Errorf("the pool was called: %v", calls)
	}
}

func TestASecondWelcomeIsAlreadyRegistered(t *testing.T) {
	m := newMemtide(t)
	startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"welcome","version":1,"tenant":"test","stats_interval_ms":60000,"dead_after_ms":180000}`)
	p.expectJSON(`{"type":"error","code":"already_registered","fatal":false}`)
}

func TestATargetWhoseSeqDoesNotGrowIsABadField(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":5,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":5,"status":"done"}`)
	p.send(`{"type":"target","seq":5,"pool_bytes":134217728,"deadline_ms":30000}`)
	got := p.expectJSON(`{"type":"error","code":"bad_field","fatal":false}`)
	if msg, _ := got["message"].(string); !strings.Contains(msg, "target.seq = 5") {
		t.Errorf("the error says %q, want it to name target.seq and its value", msg)
	}
	if calls := pool.callLog(); len(calls) != 1 {
		t.Errorf("the pool was called %v, want once", calls)
	}
}

func TestATargetAtThePoolsSizeIsDoneWithoutACallback(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":536870912,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"done","pool_bytes":536870912}`)
	if calls := pool.callLog(); len(calls) != 0 {
		t.Errorf("the pool was called: %v", calls)
	}
}

func TestANewerTargetCancelsTheRunningOneWhichIsNotAnswered(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{hold: make(chan struct{}), started: make(chan uint64, 2)}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	<-pool.started
	p.send(`{"type":"target","seq":2,"pool_bytes":1073741824,"deadline_ms":30000}`)
	// A done or failed for seq 1 would come first and fail this expect.
	p.expectJSON(`{"type":"progress","seq":2,"status":"done","pool_bytes":1073741824}`)
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if !errors.Is(pool.ctxErr, context.Canceled) {
		t.Errorf("the superseded shrink's context ended with %v, want cancelled", pool.ctxErr)
	}
	if want := []string{"shrink 268435456", "grow 1073741824"}; strings.Join(pool.calls, ",") != strings.Join(want, ",") {
		t.Errorf("the pool was called %v, want %v", pool.calls, want)
	}
}

func TestARejectedTargetAlsoCancelsTheRunningOne(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{hold: make(chan struct{}), started: make(chan uint64, 1)}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	<-pool.started
	p.send(`{"type":"target","seq":2,"pool_bytes":3,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"error","code":"bad_field"}`)
	// The shrink stops halfway (the test pool's cancelled size): stats say so, no progress.
	p.expectJSON(`{"type":"stats","pool_bytes":402653184}`)
}

func TestARunningCallbackIsReportedWorking(t *testing.T) {
	m := newMemtide(t)
	hold := make(chan struct{})
	pool := &testPool{hold: hold}
	startAgent(t, testConfig(m, pool), func(a *Agent) { a.progressEvery = 20 * time.Millisecond })
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"working","pool_bytes":536870912}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"working"}`)
	close(hold)
	p.expectJSON(`{"type":"progress","seq":1,"status":"done","pool_bytes":268435456}`)
}

func TestTheCallbackGetsTheTargetsDeadline(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	sent := time.Now()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"done"}`)
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if d := pool.deadline.Sub(sent); d < 29*time.Second || d > 31*time.Second {
		t.Errorf("the shrink's deadline was %v after the target, want 30 s", d)
	}
}

func TestAResizeThatStopsPartwayIsFailedAtTheSizeReached(t *testing.T) {
	m := newMemtide(t)
	reached := uint64(400 << 20)
	pool := &testPool{partial: &reached}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	got := p.expectJSON(`{"type":"progress","seq":1,"status":"failed","pool_bytes":419430400}`)
	if reason, _ := got["reason"].(string); !strings.Contains(reason, "pages pinned") {
		t.Errorf("the reason is %q, want the pool's error", reason)
	}
	p.expectJSON(`{"type":"stats","pool_bytes":419430400}`)
}

func TestStatsAreSentAtOnceAndThenAtMemtidesInterval(t *testing.T) {
	m := newMemtide(t)
	pool := &testPool{stats: Stats{UsedBytes: 300 << 20, Hits: 10, Misses: 2, Evictions: 1, DirtyBytes: 4096}}
	startAgent(t, testConfig(m, pool))
	p := m.accept()
	p.expectJSON(`{"type":"hello"}`)
	p.send(`{"type":"welcome","version":1,"tenant":"test","stats_interval_ms":30,"dead_after_ms":90}`)
	want := `{"type":"stats","pool_bytes":536870912,"used_bytes":314572800,"hits":10,"misses":2,"evictions":1,"dirty_bytes":4096}`
	start := time.Now()
	for i := 0; i < 4; i++ {
		p.expectJSON(want)
	}
	// The first at once, three more at most 30 ms apart.
	if took := time.Since(start); took < 3*27*time.Millisecond {
		t.Errorf("four stats took %v, want at least three intervals of 27 ms", took)
	}
}

func TestAnOverlongLineIsAnsweredTooLongAndTheSessionGoesOn(t *testing.T) {
	m := newMemtide(t)
	startAgent(t, testConfig(m, &testPool{}))
	p := m.accept()
	p.welcome()
	p.send(`{"type":"bye","reason":"` + strings.Repeat("z", MaxLineBytes) + `"}`)
	p.expectJSON(`{"type":"error","code":"too_long","fatal":false}`)
	p.send(`{"type":"target","seq":1,"pool_bytes":268435456,"deadline_ms":30000}`)
	p.expectJSON(`{"type":"progress","seq":1,"status":"done"}`)
}
