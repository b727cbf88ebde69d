// Package balloon is the Go agent of memtide's application balloon protocol
// (docs/balloon-protocol.md): it lets an application with a pool of memory — a buffer pool, a
// heap, a cache — give memory back when memtide asks and take it again when there is room.
//
// The application implements Pool (Shrink, Grow and Stats), describes the pool in a Config and
// runs an Agent on its own goroutine:
//
//	agent, err := balloon.NewAgent(balloon.Config{
//		App: "mycache", Kind: balloon.KindCache,
//		PoolBytes: 8 << 30, MinBytes: 1 << 30, MaxBytes: 8 << 30, GranuleBytes: 1 << 20,
//		Pool: cache,
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	go agent.Run(ctx) // until ctx is done; then it says bye
//
// The agent connects to the Unix socket at Config.SocketPath, $MEMTIDE_BALLOON_SOCKET or
// /run/memtide/balloon.sock, registers the pool, reports its Stats at the interval memtide
// asks for, and answers each target by calling Shrink or Grow (reporting "working" about once
// a second while it runs). It reconnects with exponential back-off whenever the connection
// drops, and its errors are typed: errors.Is(err, balloon.CodeBusy) and *ProtocolError.
package balloon
