// A compiled example of an application registering its pool: the README's quick start
// (compiled by go test and shown by go doc, not run: it would wait for memtide).

package balloon_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"sync"

	balloon "github.com/memtide/memtide/sdk/go/balloon"
)

// cache stands for the application's pool.
type cache struct {
	mu   sync.Mutex
	size uint64
}

func (c *cache) Shrink(ctx context.Context, to uint64) error { return c.resize(to) }
func (c *cache) Grow(ctx context.Context, to uint64) error   { return c.resize(to) }

func (c *cache) resize(to uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.size = to // a real pool frees or allocates the memory here
	return nil
}

func (c *cache) Stats() balloon.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return balloon.Stats{UsedBytes: c.size}
}

func Example() {
	cache := &cache{size: 8 << 30}
	agent, err := balloon.NewAgent(balloon.Config{
		App: "mycache", Kind: balloon.KindCache,
		PoolBytes: 8 << 30, MinBytes: 1 << 30, MaxBytes: 8 << 30, GranuleBytes: 16 << 20,
		Pool:         cache,
		OnRegistered: func(tenant string) { log.Printf("ballooning for tenant %s", tenant) },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := agent.Run(ctx); err != nil { // until ctx is done; then it says bye
		log.Fatal(err)
	}
}
