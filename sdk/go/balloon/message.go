// The messages of the balloon protocol as Go structs, and their encoding as one JSON line each
// with its "type" first (docs/balloon-protocol.md, "Messages").

package balloon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Version is the protocol version this package speaks.
const Version = 1

// MaxInteger is the largest byte count, counter or sequence number on the wire: 2^53 − 1,
// exact in every language's JSON.
const MaxInteger = 1<<53 - 1

// MaxLineBytes is the longest line either side may send, its newline included.
const MaxLineBytes = 65536

// maxReasonBytes bounds a bye's or a failed progress's reason.
const maxReasonBytes = 1024

// message is any message of the protocol; wireType is its "type".
type message interface {
	wireType() string
}

// hello registers the agent (agent → memtide).
type hello struct {
	Version      int    `json:"version"`
	App          string `json:"app"`
	Kind         Kind   `json:"kind"`
	PID          int    `json:"pid"`
	PoolBytes    uint64 `json:"pool_bytes"`
	MinBytes     uint64 `json:"min_bytes"`
	MaxBytes     uint64 `json:"max_bytes"`
	GranuleBytes uint64 `json:"granule_bytes"`
}

// welcome accepts the hello (memtide → agent).
type welcome struct {
	Version         int    `json:"version"`
	Tenant          string `json:"tenant"`
	StatsIntervalMS uint64 `json:"stats_interval_ms"`
	DeadAfterMS     uint64 `json:"dead_after_ms"`
}

// target asks for a pool size (memtide → agent).
type target struct {
	Seq        uint64 `json:"seq"`
	PoolBytes  uint64 `json:"pool_bytes"`
	DeadlineMS uint64 `json:"deadline_ms"`
}

// status is a progress's state.
type status string

const (
	statusWorking status = "working"
	statusDone    status = "done"
	statusFailed  status = "failed"
)

// progress answers a target (agent → memtide).
type progress struct {
	Seq       uint64 `json:"seq"`
	PoolBytes uint64 `json:"pool_bytes"`
	Status    status `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// stats reports the pool (agent → memtide).
type stats struct {
	PoolBytes  uint64 `json:"pool_bytes"`
	UsedBytes  uint64 `json:"used_bytes"`
	Hits       uint64 `json:"hits"`
	Misses     uint64 `json:"misses"`
	Evictions  uint64 `json:"evictions"`
	DirtyBytes uint64 `json:"dirty_bytes"`
}

// bye ends the session (either side).
type bye struct {
	Reason string `json:"reason,omitempty"`
}

// errorMessage reports an error (either side).
type errorMessage struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Fatal   bool   `json:"fatal"`
}

func (hello) wireType() string        { return "hello" }
func (welcome) wireType() string      { return "welcome" }
func (target) wireType() string       { return "target" }
func (progress) wireType() string     { return "progress" }
func (stats) wireType() string        { return "stats" }
func (bye) wireType() string          { return "bye" }
func (errorMessage) wireType() string { return "error" }

// encode writes m as one line of JSON with its "type" first, ended by "\n".
func encode(m message) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", m.wireType(), err)
	}
	var line bytes.Buffer
	line.Grow(len(body) + 32)
	fmt.Fprintf(&line, `{"type":%q`, m.wireType())
	if fields := body[1 : len(body)-1]; len(fields) > 0 {
		line.WriteByte(',')
		line.Write(fields)
	}
	line.WriteString("}\n")
	return line.Bytes(), nil
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
