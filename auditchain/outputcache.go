package auditchain

import (
	"sync"
	"time"
)

// Reading a long output page by page asks for the same blob once a page:
// without a cache each page reads the whole blob (up to 8 MiB) from the
// database and hashes it again, so paging a stream cost its size times
// its pages. The cache keeps the last blobs read, already checked against
// their digests, for a short while: blobs are addressed by their digest
// and never change, so an entry is never stale; it only costs memory,
// which the caps bound and the idle timer gives back.
const (
	// blobCacheBytes caps the bytes the cache holds: two blobs of the
	// default cap, a stream's stored head and end.
	blobCacheBytes = 2 * DefaultMaxBlob
	// blobCacheIdle is how long the cache keeps its blobs after the last
	// read that used it.
	blobCacheIdle = 30 * time.Second
	// blobCacheMin: smaller blobs are read from the database each time;
	// caching them saves nothing worth their place.
	blobCacheMin = 64 << 10
)

// blobCache holds recently read blobs, most recent first.
type blobCache struct {
	mu    sync.Mutex
	max   int
	idle  time.Duration
	ents  []cachedBlob
	bytes int
	timer *time.Timer
}

type cachedBlob struct {
	digest [32]byte
	data   []byte
}

// get returns the cached bytes of digest (not to be modified) and marks
// them the most recently used.
func (c *blobCache) get(digest [32]byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.ents {
		if e.digest == digest {
			copy(c.ents[1:i+1], c.ents[:i])
			c.ents[0] = e
			c.touch()
			return e.data, true
		}
	}
	return nil, false
}

// put caches data, checked against digest, evicting the least recently
// used blobs past the byte cap. Blobs too small or too large to be worth
// their place are not kept.
func (c *blobCache) put(digest [32]byte, data []byte) {
	if len(data) < blobCacheMin || len(data) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.ents {
		if e.digest == digest {
			return
		}
	}
	c.ents = append([]cachedBlob{{digest: digest, data: data}}, c.ents...)
	c.bytes += len(data)
	for c.bytes > c.max {
		last := c.ents[len(c.ents)-1]
		c.ents = c.ents[:len(c.ents)-1]
		c.bytes -= len(last.data)
	}
	c.touch()
}

// touch (with c.mu held) restarts the idle timer that empties the cache.
func (c *blobCache) touch() {
	if c.timer != nil {
		c.timer.Reset(c.idle)
		return
	}
	c.timer = time.AfterFunc(c.idle, c.clear)
}

// clear drops every cached blob.
func (c *blobCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ents, c.bytes = nil, 0
}

// stop drops every cached blob and the idle timer (the store is closed).
func (c *blobCache) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.ents, c.bytes = nil, 0
}
