// Errors of the balloon protocol: the error codes of docs/balloon-protocol.md as a typed
// Code, ProtocolError for an error line sent or received, and the session's other endings.

package balloon

import (
	"errors"
	"fmt"
)

// Code is an error code of the protocol. It implements error, so that
// errors.Is(err, balloon.CodeBusy) tells what a *ProtocolError (or anything wrapping one) was.
type Code string

// The error codes of protocol version 1.
const (
	CodeMalformed         Code = "malformed"          // the line is not a JSON object, or not UTF-8
	CodeTooLong           Code = "too_long"           // the line is over 65,536 bytes
	CodeUnknownType       Code = "unknown_type"       // type is missing or names no message of this version
	CodeBadField          Code = "bad_field"          // a field is missing, of the wrong type, or breaks its rule
	CodeVersion           Code = "version"            // a version the receiver does not speak
	CodeNotRegistered     Code = "not_registered"     // a message that needs a registration before it
	CodeAlreadyRegistered Code = "already_registered" // a second hello (or welcome) on one connection
	CodeIdentity          Code = "identity"           // hello.pid is not the peer's pid, or in no tenant
	CodeBusy              Code = "busy"               // the tenant already has a live agent
	CodeUnknownSeq        Code = "unknown_seq"        // a progress for a seq memtide never sent
	CodeViolations        Code = "violations"         // too many errors on the connection
	CodeDead              Code = "dead"               // no stats for dead_after_ms
	CodeDeadline          Code = "deadline"           // a target was not done by its deadline
	CodeDishonest         Code = "dishonest"          // done was reported but the memory did not fall
)

// known reports whether c is one of version 1's codes.
func (c Code) known() bool {
	switch c {
	case CodeMalformed, CodeTooLong, CodeUnknownType, CodeBadField, CodeVersion,
		CodeNotRegistered, CodeAlreadyRegistered, CodeIdentity, CodeBusy, CodeUnknownSeq,
		CodeViolations, CodeDead, CodeDeadline, CodeDishonest:
		return true
	}
	return false
}

// Error returns the code itself, such as "busy".
func (c Code) Error() string { return string(c) }

// ProtocolError is an error line of the protocol: one the agent answered a line from memtide
// with, or one memtide sent. errors.Is(err, code) matches its Code.
type ProtocolError struct {
	Code    Code
	Message string // what is wrong, naming the field and value where there is one
	Fatal   bool   // the sender closes the connection after it
	Remote  bool   // memtide sent it (otherwise the agent found it in memtide's line)
}

func (e *ProtocolError) Error() string {
	who := "memtide's line"
	if e.Remote {
		who = "memtide"
	}
	fatal := ""
	if e.Fatal {
		fatal = ", fatal"
	}
	if e.Message == "" {
		return fmt.Sprintf("balloon: %s: %s%s", who, e.Code, fatal)
	}
	return fmt.Sprintf("balloon: %s: %s%s: %s", who, e.Code, fatal, e.Message)
}

// Unwrap returns the Code, for errors.Is.
func (e *ProtocolError) Unwrap() error { return e.Code }

// protocolErrorf makes the error the agent answers an unreadable or invalid line with.
func protocolErrorf(code Code, format string, args ...any) *ProtocolError {
	return &ProtocolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

var (
	// ErrBye is wrapped by the error that ends a session because memtide said bye.
	ErrBye = errors.New("memtide said bye")
	// ErrNoWelcome is wrapped by the error that ends a session whose hello was not answered.
	ErrNoWelcome = errors.New("no welcome from memtide")
	// ErrInvalidConfig is wrapped by every error NewAgent returns for a Config it refuses.
	ErrInvalidConfig = errors.New("invalid balloon config")
	// ErrRunning is returned by Run when the agent is already running.
	ErrRunning = errors.New("balloon agent is already running")
)
